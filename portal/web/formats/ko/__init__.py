"""The console's date formats in this language (see ``portal.web.formats``)."""
