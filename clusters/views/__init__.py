"""The clusters console's pages: the list, detail and actions (``clusters``), members and
operations (``members``), help (``help``) and 검증 (``validation``)."""
