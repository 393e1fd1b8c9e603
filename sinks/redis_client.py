"""Build the `redis.Redis` client the sink writes through: URL, ACL user, password, TLS.

The password is a SecretStr and is never logged; a URL carrying a password is refused so that
the secret cannot leak through a logged or printed setting. The client does no retrying of its
own: RedisSink's bounded retries are the one retry policy, so a dead server fails in a
predictable time.
"""

from __future__ import annotations

import logging
from typing import Literal
from urllib.parse import urlsplit

import redis
from pydantic import BaseModel, ConfigDict, PositiveFloat, SecretStr, field_validator, model_validator
from redis.backoff import NoBackoff
from redis.retry import Retry

log = logging.getLogger(__name__)

SCHEMES = ("redis", "rediss", "unix")


class RedisConnectionSettings(BaseModel):
    """Where and how to connect. `rediss://` turns TLS on; the ssl_* files then apply."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = "redis://127.0.0.1:6379/0"
    username: str | None = None  # ACL user; None means the 'default' user
    password: SecretStr | None = None
    ssl_ca_certs: str | None = None  # CA bundle (PEM) that signed the server certificate
    ssl_certfile: str | None = None  # client certificate, for mutual TLS
    ssl_keyfile: str | None = None
    ssl_cert_reqs: Literal["required", "optional", "none"] = "required"
    ssl_check_hostname: bool = True
    socket_timeout_s: PositiveFloat = 5.0
    socket_connect_timeout_s: PositiveFloat = 5.0
    client_name: str = "replmon-sink"

    @field_validator("url")
    @classmethod
    def _url_is_redis_without_secret(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in SCHEMES:
            raise ValueError(f"url must start with one of {', '.join(s + '://' for s in SCHEMES)}")
        if parts.password:
            raise ValueError("url must not carry a password; set `password` instead")
        return url

    @model_validator(mode="after")
    def _tls_options_need_rediss(self) -> RedisConnectionSettings:
        tls = [n for n in ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile") if getattr(self, n)]
        if tls and urlsplit(self.url).scheme != "rediss":
            raise ValueError(f"{', '.join(tls)} set but url is not rediss://")
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile):
            raise ValueError("ssl_certfile and ssl_keyfile go together")
        return self

    def redacted_url(self) -> str:
        parts = urlsplit(self.url)
        user = f"{self.username or parts.username}@" if (self.username or parts.username) else ""
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{user}{parts.hostname or ''}{port}{parts.path}"


def build_client(settings: RedisConnectionSettings) -> redis.Redis:
    """A client for `settings`; connects lazily, on the first command."""
    kwargs: dict = {
        "socket_timeout": settings.socket_timeout_s,
        "socket_connect_timeout": settings.socket_connect_timeout_s,
        "client_name": settings.client_name,
        "retry": Retry(NoBackoff(), 0),
    }
    if settings.username is not None:
        kwargs["username"] = settings.username
    if settings.password is not None:
        kwargs["password"] = settings.password.get_secret_value()
    if urlsplit(settings.url).scheme == "rediss":
        kwargs.update(
            ssl_ca_certs=settings.ssl_ca_certs,
            ssl_certfile=settings.ssl_certfile,
            ssl_keyfile=settings.ssl_keyfile,
            ssl_cert_reqs=settings.ssl_cert_reqs,
            ssl_check_hostname=settings.ssl_check_hostname,
        )
    log.info("Redis client for %s", settings.redacted_url())
    return redis.Redis.from_url(settings.url, **kwargs)
