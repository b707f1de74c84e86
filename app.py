"""Entry point for every Lambda function. ``ROUTE_GROUP`` (set per stage in .chalice/config.json)
picks the group whose routes this deployment serves; event handlers are one-line delegates."""
import os

from chalice import Rate

from chalicelib.groups import create_app

GROUP = os.environ.get("ROUTE_GROUP", "platform")
app = create_app(GROUP)

if GROUP == "workers":
    from chalicelib.workers import jobs

    @app.schedule(Rate(30, unit=Rate.DAYS))
    def rotate_signing_keys(event):
        return jobs.rotate_signing_keys(event.to_dict())

    @app.schedule(Rate(1, unit=Rate.HOURS))
    def retire_signing_keys(event):
        return jobs.retire_signing_keys(event.to_dict())

    @app.schedule(Rate(5, unit=Rate.MINUTES))
    def expire_support_grants(event):
        return jobs.expire_support_grants(event.to_dict())

    @app.schedule(Rate(15, unit=Rate.MINUTES))  # own role: .chalice/config.json lambda_functions
    def audit_digest(event):
        return jobs.audit_digest(event.to_dict())

    from chalicelib.core.aws import queue_name

    @app.on_sqs_message(queue=queue_name("sync-jobs"), batch_size=1)
    def sync_jobs(event):
        return jobs.as_lambda(jobs.sync_jobs, event.to_dict())

    @app.on_sqs_message(queue=queue_name("audit-exports"), batch_size=1)  # own role, as audit_digest
    def audit_exports(event):
        return jobs.as_lambda(jobs.audit_exports, event.to_dict())
