"""Who may do what: the permission strings and built-in roles, the session's user with their
roles, the current project, API tokens, and the rate limiter that guards logins and tokens."""
