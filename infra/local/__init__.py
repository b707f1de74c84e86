"""What `make run` runs beside the route groups: the queue workers of each region (``workers.py``) and
the status of the whole local platform (``status.py``, ``make status``)."""
