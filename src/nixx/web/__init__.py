"""The memory browser: a small server-rendered web app at ``/ui`` on `nixx serve`.

FastAPI routes (`routes`) render Jinja2 templates (`templates/`, autoescaped: memory
content is untrusted text) over the same `NixxService` calls as the API, so a summary
deleted here is forgotten exactly as through ``DELETE /v1/episodic/summaries/{id}``.
No script is needed; the one stylesheet is served from ``/ui/static``; nothing is
fetched from another host, so the page works offline. Access and cross-site
protection are in `security`; long ingests run as `jobs` whose progress page refreshes
itself. See docs/web.md.
"""
