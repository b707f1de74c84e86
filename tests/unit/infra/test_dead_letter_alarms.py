"""Every queue's dead-letter queue has a CloudWatch alarm in each regional template (``infra/template.py``):
it fires on the first message and notifies the region's operator topic."""
from __future__ import annotations

import pytest

from chalicelib.core.regions import OPEN_REGIONS
from infra.resources import QUEUES
from infra.template import ALARM_TOPIC, resources_template


@pytest.mark.parametrize("region", OPEN_REGIONS)
def test_each_dead_letter_queue_has_an_alarm_to_the_operator_topic(region: str) -> None:
    resources = resources_template(region)["Resources"]
    alarms = {r["Properties"]["Dimensions"][0]["Value"]["Fn::GetAtt"][0]: r["Properties"]
              for r in resources.values() if r["Type"] == "AWS::CloudWatch::Alarm"}
    dead_letter_queues = {name for name, r in resources.items() if r["Type"] == "AWS::SQS::Queue"
                          and r["Properties"]["QueueName"].endswith("-dlq")}
    assert len(dead_letter_queues) == len(QUEUES)
    assert set(alarms) == dead_letter_queues
    for alarm in alarms.values():
        assert alarm["Namespace"] == "AWS/SQS" and alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
        assert alarm["Threshold"] == 0 and alarm["ComparisonOperator"] == "GreaterThanThreshold"
        assert alarm["AlarmActions"] == [{"Ref": ALARM_TOPIC}]
    assert resources[ALARM_TOPIC]["Type"] == "AWS::SNS::Topic"
