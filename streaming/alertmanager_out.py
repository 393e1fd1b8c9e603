"""Builds the Alertmanager sink from the monitor's settings (the sinks package never reads them)."""

from __future__ import annotations

import logging

from replmon.sinks.alertmanager import AlertmanagerSettings, AlertmanagerSink
from replmon.streaming.settings import AlertmanagerOut, sink_settings

log = logging.getLogger(__name__)


def build_alertmanager_sink(conf: AlertmanagerOut) -> AlertmanagerSink:
    log.info("posting notified alerts to Alertmanager at %s", conf.url)
    return AlertmanagerSink(sink_settings(AlertmanagerSettings, conf))
