"""The console's web layer shared by the apps: the middleware (request ids, language, the
current project, refusals as pages), lists, rendering and HTMX frames, Korean particles,
problem documents for ``/api/``, and the shell's own pages (login, project switcher, health)."""
