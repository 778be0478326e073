"""The other wire dialects nixx speaks, translated at the edge onto the one chat turn.

    responses.py   OpenAI's Responses API (`POST /v1/responses`): input items to chat
                   messages, turn events to the Responses event stream
    anthropic.py   Anthropic's Messages API (`POST /v1/messages`): blocks to chat messages,
                   turn events to Anthropic's events
    system.py      both: where a system or developer message inside the conversation goes
                   (a stable place), and the harness spans kept out of the buffer row

Each module is pure translation (no I/O, no service): a request in the dialect becomes
the OpenAI chat request `nixx.memory.turn.run_turn` takes, and the turn's events become
the dialect's answer. The routes (`nixx.server.routes.responses`, `.messages`) run the
turn through `NixxService.turn` exactly as the chat route does, so recall, the buffer,
summaries and intent are the same for every client.
"""
