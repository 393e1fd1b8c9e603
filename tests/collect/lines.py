"""Request-log lines in the shape Kafka 4.3.1 writes them (copied field by field from lines
seen on the local brokers, with the values chosen per test)."""

from __future__ import annotations

import json

TOPIC_ID = "lDUBY5EjSxyny99XasZ59w"


def fetch_line(
    log_ms,
    replica,
    *,
    session_id=7,
    epoch=1,
    requested=(),
    responded=(),
    forgotten=(),
    total=2.0,
    queue=0.1,
    remote=0.0,
    max_bytes=10485760,
    error=0,
    client=None,
    response_session=None,
):
    """requested: (partition, fetch_offset[, partitionMaxBytes]); responded: (partition,
    recordsSizeInBytes, highWatermark[, errorCode])."""
    req_topics = (
        [
            {
                "topicId": TOPIC_ID,
                "partitions": [
                    {
                        "partition": r[0],
                        "currentLeaderEpoch": 0,
                        "fetchOffset": r[1],
                        "lastFetchedEpoch": 0,
                        "logStartOffset": 0,
                        "partitionMaxBytes": r[2] if len(r) > 2 else 1048576,
                    }
                    for r in requested
                ],
            }
        ]
        if requested
        else []
    )
    resp = (
        [
            {
                "topicId": TOPIC_ID,
                "partitions": [
                    {
                        "partitionIndex": r[0],
                        "errorCode": r[3] if len(r) > 3 else 0,
                        "highWatermark": r[2],
                        "lastStableOffset": r[2],
                        "logStartOffset": 0,
                        "abortedTransactions": None,
                        "preferredReadReplica": -1,
                        "recordsSizeInBytes": r[1],
                    }
                    for r in responded
                ],
            }
        ]
        if responded
        else []
    )
    body = {
        "isForwarded": False,
        "requestHeader": {
            "requestApiKey": 1,
            "requestApiVersion": 18,
            "correlationId": 3,
            "clientId": client or f"broker-{replica}-fetcher-0",
            "requestApiKeyName": "FETCH",
        },
        "request": {
            "replicaState": {"replicaId": replica, "replicaEpoch": 10},
            "maxWaitMs": 500,
            "minBytes": 1,
            "maxBytes": max_bytes,
            "isolationLevel": 0,
            "sessionId": session_id,
            "sessionEpoch": epoch,
            "topics": req_topics,
            "forgottenTopicsData": [{"topicId": TOPIC_ID, "partitions": list(forgotten)}]
            if forgotten
            else [],
            "rackId": "",
        },
        "response": {
            "throttleTimeMs": 0,
            "errorCode": error,
            "sessionId": session_id if response_session is None else response_session,
            "responses": resp,
        },
        "connection": "127.0.0.1:26592-127.0.0.1:56902-0-2",
        "totalTimeMs": total,
        "requestQueueTimeMs": queue,
        "localTimeMs": 0.5,
        "remoteTimeMs": remote,
        "throttleTimeMs": 0,
        "responseQueueTimeMs": 0.1,
        "sendTimeMs": 0.2,
    }
    return f"[{log_ms}] Completed request:{json.dumps(body)}"


def produce_line(log_ms, partition, base_offset, *, topic="t1", total=10.0, queue=1.0, local=2.0, error=0):
    body = {
        "isForwarded": False,
        "requestHeader": {
            "requestApiKey": 0,
            "requestApiVersion": 9,
            "correlationId": 22,
            "clientId": "kafka-python-producer-1",
            "requestApiKeyName": "PRODUCE",
        },
        "request": {
            "transactionalId": None,
            "acks": -1,
            "timeoutMs": 30000,
            "topicData": [
                {"name": topic, "partitionData": [{"index": partition, "recordsSizeInBytes": 3876}]}
            ],
        },
        "response": {
            "responses": [
                {
                    "name": topic,
                    "partitionResponses": [
                        {
                            "index": partition,
                            "errorCode": error,
                            "baseOffset": base_offset,
                            "logAppendTimeMs": -1,
                            "logStartOffset": 0,
                            "recordErrors": [],
                            "errorMessage": None,
                        }
                    ],
                }
            ],
            "throttleTimeMs": 0,
        },
        "totalTimeMs": total,
        "requestQueueTimeMs": queue,
        "localTimeMs": local,
        "remoteTimeMs": 5.0,
    }
    return f"[{log_ms}] Completed request:{json.dumps(body)}"


def heartbeat_line(log_ms, broker, *, want_shutdown=False, epoch=19):
    """A broker's heartbeat as the KRaft controller logs it (the shape of a real Kafka 4.3 line)."""
    body = {
        "isForwarded": False,
        "requestHeader": {
            "requestApiKey": 63,
            "requestApiVersion": 2,
            "correlationId": 2,
            "clientId": str(broker),
            "requestApiKeyName": "BROKER_HEARTBEAT",
        },
        "request": {
            "brokerId": broker,
            "brokerEpoch": epoch,
            "currentMetadataOffset": 19,
            "wantFence": False,
            "wantShutDown": want_shutdown,
        },
        "response": {
            "throttleTimeMs": 0,
            "errorCode": 0,
            "isCaughtUp": True,
            "isFenced": False,
            "shouldShutDown": False,
        },
        "totalTimeMs": 3.2,
        "requestQueueTimeMs": 0.1,
        "localTimeMs": 2.0,
        "remoteTimeMs": 0.0,
        "listener": "CONTROLLER",
    }
    return f"[{log_ms}] Completed request:{json.dumps(body)}"
