"""A minimal OpenID Connect issuer: the identity provider the secured registry checks logins with.

Apicurio Registry 2.4 has no local user list: HTTP basic credentials are a client id and secret
it exchanges at an issuer's token endpoint (client-credentials grant) for a signed JWT, which it
then verifies against the issuer's published keys. This serves exactly that much of the protocol
(discovery document, JWKS, token endpoint; RS256) on loopback, for a fixed set of clients — the
part of Keycloak the registry uses, without running Keycloak.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
import urllib.parse
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

TOKEN_LIFETIME_S = 300


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _uint(n: int) -> str:
    return _b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))


class OidcIssuer:
    """Serves `/.well-known/openid-configuration`, `/jwks` and `/token` until `stop()`.

    `roles`: client id -> the roles its tokens carry (the `groups` claim, where Quarkus, and
    so the registry, reads them; Keycloak's `realm_access.roles` too)."""

    def __init__(
        self, clients: Mapping[str, str], roles: Mapping[str, list[str]] | None = None
    ) -> None:
        self.clients = dict(clients)
        self.roles = dict(roles or {})
        self.requests: list[str] = []  # "METHOD path" of each request, in order
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._kid = secrets.token_hex(8)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.token_endpoint = f"{self.url}/token"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "jwks_uri": f"{self.url}/jwks",
            "token_endpoint": self.token_endpoint,
            "grant_types_supported": ["client_credentials"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "response_types_supported": ["token"],
            "subject_types_supported": ["public"],
        }

    def jwks(self) -> dict[str, Any]:
        numbers = self._key.public_key().public_numbers()
        key = {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self._kid}
        return {"keys": [{**key, "n": _uint(numbers.n), "e": _uint(numbers.e)}]}

    def token(self, client_id: str, client_secret: str) -> dict[str, Any] | None:
        """An access token for a known client, None for anyone else."""
        expected = self.clients.get(client_id)
        if expected is None or not secrets.compare_digest(expected, client_secret):
            return None
        now = int(time.time())
        claims = {
            "iss": self.url,
            "sub": client_id,
            "azp": client_id,
            "preferred_username": client_id,
            "iat": now,
            "exp": now + TOKEN_LIFETIME_S,
            "jti": secrets.token_hex(8),
            "groups": self.roles.get(client_id, []),
            "realm_access": {"roles": self.roles.get(client_id, [])},
        }
        header = {"alg": "RS256", "typ": "JWT", "kid": self._kid}
        signing_input = (
            f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        )
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return {
            "access_token": f"{signing_input}.{_b64url(signature)}",
            "token_type": "Bearer",
            "expires_in": TOKEN_LIFETIME_S,
        }


def _handler(issuer: OidcIssuer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            issuer.requests.append(f"GET {self.path}")
            if self.path == "/.well-known/openid-configuration":
                self._json(200, issuer.discovery())
            elif self.path == "/jwks":
                self._json(200, issuer.jwks())
            else:
                self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:
            issuer.requests.append(f"POST {self.path}")
            if self.path.rstrip("/") != "/token":  # the registry's client appends a slash
                self._json(404, {"error": "not_found"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            form = urllib.parse.parse_qs(self.rfile.read(length).decode())
            client_id, client_secret = self._client_credentials(form)
            if form.get("grant_type") != ["client_credentials"]:
                self._json(400, {"error": "unsupported_grant_type"})
                return
            token = issuer.token(client_id, client_secret)
            if token is None:
                self._json(401, {"error": "invalid_client"})
            else:
                self._json(200, token)

        def _client_credentials(self, form: dict[str, list[str]]) -> tuple[str, str]:
            """From the form (client_secret_post) or an Authorization header (_basic)."""
            auth = self.headers.get("Authorization") or ""
            if auth.startswith("Basic "):
                decoded = base64.b64decode(auth[6:]).decode()
                user, _, password = decoded.partition(":")
                return urllib.parse.unquote(user), urllib.parse.unquote(password)
            return form.get("client_id", [""])[0], form.get("client_secret", [""])[0]

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: pytest output is for test results."""

    return Handler
