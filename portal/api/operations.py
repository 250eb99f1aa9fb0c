"""operations: the record of every change made through the API (and the console's bulk
actions). Filled in once the Operation core is merged."""

from ninja import Router

router = Router(tags=["operations"])
