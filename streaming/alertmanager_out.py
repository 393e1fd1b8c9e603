"""Builds the Alertmanager sink from the monitor's settings (the sinks package never reads them)."""

from __future__ import annotations

import logging

from replmon.sinks.alertmanager import AlertmanagerSettings, AlertmanagerSink
from replmon.streaming.settings import AlertmanagerOut

log = logging.getLogger(__name__)


def build_alertmanager_sink(conf: AlertmanagerOut) -> AlertmanagerSink:
    log.info("posting notified alerts to Alertmanager at %s", conf.url)
    return AlertmanagerSink(
        AlertmanagerSettings(
            url=conf.url, resend_interval_s=conf.resend_interval_s, generator_url=conf.generator_url
        )
    )
