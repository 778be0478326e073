"""The wire dialects nixx speaks, each translated at the edge onto the one chat turn.

    adapter.py      the shape every dialect has (`Adapter`: request -> the turn's typed
                    input, each typed event -> its wire events, a failure -> its error
                    event, the finished turn -> its JSON), the one streaming path
                    (`Adapter.wire`) and the one route helper that answers any of them
                    (`answer_turn`)
    openai_chat.py  OpenAI chat completions (`POST /v1/chat/completions`): chunks, usage
    responses.py    OpenAI's Responses API (`POST /v1/responses`): input items to chat
                    messages, turn events to the Responses event stream
    anthropic.py    Anthropic's Messages API (`POST /v1/messages`): blocks to chat
                    messages, turn events to Anthropic's events
    system.py       both: where a system or developer message inside the conversation goes
                    (a stable place), and the harness spans kept out of the buffer row

Each dialect module is translation (no service): a request in the dialect becomes the
`nixx.memory.turn_events.TurnInput` the turn takes, and the turn's events become the
dialect's answer. The routes (`nixx.server.routes.chat`, `.responses`, `.messages`) parse,
build the dialect's adapter and call `answer_turn`, so recall, the buffer, summaries and
intent are the same for every client.
"""
