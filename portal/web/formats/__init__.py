"""Date formats as the console writes them (``YYYY-MM-DD HH:MM``, ``portal.templatetags.
console.short_time``), for what Django formats by itself: the admin's dates and times."""
