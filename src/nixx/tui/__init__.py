"""`nixx chat`: the Textual terminal client of the nixx server.

`make_app(settings, url=...)` builds the app (shared by the CLI and the tests);
`run_chat(settings, url=...)` is the whole `nixx chat` verb (autostart included).
"""
