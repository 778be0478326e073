"""nxc's delivery wing: getting a message to an agent and its answer back.

The chat core (`nixx.nxc`: declarations, the chat reducer, threads, the engine) knows
only the seam, `hooks.Delivery`, which `Engine` calls after each write. Everything that
starts, runs, wakes and records agent sessions lives here. A new reader opens
`dispatch.py` first (what a send or a reply sets in motion), then `launcher.py` (whether
a session is started or woken), `runs.py` (how one run of it is made and launched), then
`supervisor.py` (the process that watches a run).

    hooks.py            the seam `Engine` calls (`Delivery`, its no-op methods;
                        `NoDelivery`), and the contexts it hands over
    dispatch.py         `LiveDelivery`: who a send or a reply starts, resumes or wakes
    launcher.py         `Deliverer`: start a persona's session for a thread, wake one
                        with answers, record each outcome; where the caller stands
    runs.py             one run of a session: a new session and its first run
                        (`first_run`), prepared (`Run`: its hop, files, argv from the
                        persona's runtime, the cleared child environment), launched under
                        a detached supervisor, resumed (the one resume builder)
    folders.py          every path of a session (`SessionFolder`) and of a round
    rounds.py           channel rounds: one send to a channel runs its members as a tree
    gates.py            steps held for a person's approval (`nixx.nxc.approvals`) and
                        what to do once decided (device-local); `dispatch.take_decided`
                        takes them
    sessions.py         the session state machine and the wake queue (device-local)
    chain.py            the policy: may a session start here (hop guard, resume bounds),
                        and the NXC_* environment parsed once (`NxcEnv`)
    spawn.py            which session a process runs in, read from the process tree
    shapes.py           the named shapes of a launch: `Backend`, `RunSpec`, `Launched`
                        (annotations only)
    supervisor.py       `python -m nixx.nxc.delivery.supervisor RUNFILE`: one session's runs
    presets.py          argv presets for agent CLIs (claude-code, codex, gemini)
    builtin_runtime.py  `python -m nixx.nxc.delivery.builtin_runtime`: the runtime `nixx`
    llm_backend.py      the LLM backend of the built-in runtime and of round summaries
                        (`from_settings`: the backend file's settings and keys)
    session_prompt.py   the prompt a session is started or resumed with
    stream_parser.py    the contract of a transcript format's line parser
    stream_claude.py    Claude Code's stream-json → transcript entries
    stream_formats.py   codex-json, gemini-json, nixx, none; `parser_for(format)`
    transcripts.py      each session's normalised transcript (device-local)
    localstore.py       `.nxs/local.sqlite`: the device-local store, never synced
    outcomes.py         delivery outcomes in the log (domain ``delivery``, synced)

Nothing is imported here: import the module you need.
"""
