"""Entry point for every Lambda function. ``ROUTE_GROUP`` (set per stage in .chalice/config.json)
picks the group whose routes this deployment serves and ``REGION`` the region it is pinned to. The workers
group derives one handler per job declared in ``chalicelib/workers/jobs.py`` (schedules and queues are
declared there only) that runs in this deployment (``jobs.runs_here``: global jobs in the global region)."""
import gc

# A cold start allocates long-lived objects only (modules, routes, models): no cyclic collection while they
# load, then they leave the collector's generations, so a request's collections do not walk them again.
gc.disable()

from chalice import Rate  # noqa: E402

from chalicelib.core.config import settings  # noqa: E402
from chalicelib.groups import HTTP_GROUPS, create_app, prime, warm_up  # noqa: E402

GROUP = settings().route_group
app = create_app(GROUP)
warm_up()  # the clients and table classes every request needs, in the init phase instead of the first request
if GROUP in HTTP_GROUPS and settings().in_lambda:  # in Lambda, not in tools importing app.py
    prime()  # the keys and revocation watermark the first request would read


def rate(seconds: int) -> Rate:
    """The CloudWatch rate for an interval, in the largest unit that divides it."""
    for unit, size in ((Rate.DAYS, 86400), (Rate.HOURS, 3600), (Rate.MINUTES, 60)):
        if seconds % size == 0:
            return Rate(seconds // size, unit=unit)
    raise ValueError(f"a schedule must be whole minutes, not {seconds} s")


def _scheduled_delegate(job):
    def handler(event):
        return job.handler(event.to_dict())

    handler.__name__ = handler.__qualname__ = job.name  # Lambda calls app.<name>
    return handler


def _queue_delegate(name, job):
    def handler(event):
        return jobs.as_lambda(job, event.to_dict())

    handler.__name__ = handler.__qualname__ = name
    return handler


if GROUP == "workers":
    from chalicelib.core.aws import queue_name
    from chalicelib.workers import jobs

    for _job in filter(jobs.runs_here, jobs.SCHEDULED):
        globals()[_job.name] = app.schedule(rate(_job.every_seconds), name=_job.name)(_scheduled_delegate(_job))
    for _queue, _handler in jobs.QUEUE_HANDLERS.items():
        _name = jobs.handler_name(_queue)
        globals()[_name] = app.on_sqs_message(queue=queue_name(_queue), batch_size=1, name=_name)(
            _queue_delegate(_name, _handler))

gc.freeze()
gc.enable()
