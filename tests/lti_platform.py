"""An LTI 1.3 Advantage platform (the LMS's side) on 127.0.0.1 for the tests and the bench: it really signs and
verifies, so the course's tool is tested against the specs, not against itself.

The endpoints, and the spec sections they follow:

- Token endpoint (IMS Security Framework 1.0, section 4.1 "Using JSON Web Tokens with OAuth 2.0 Client Credentials
  Grant"; RFC 6749 sections 4.4, 5.1 and 5.2; RFC 7523 sections 2.2 and 3): ``POST /token``, a form with
  ``grant_type=client_credentials``, ``client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer``,
  ``client_assertion`` (a JWT signed RS256 by the tool: ``iss`` = ``sub`` = the client id, ``aud`` = the token URL or
  the configured audience, ``iat``, ``exp`` in the future, a ``jti`` never used before) and ``scope``. Answers
  ``{"access_token", "token_type": "Bearer", "expires_in", "scope"}`` (the scopes granted, RFC 6749 section 3.3);
  a bad assertion is ``401 {"error": "invalid_client"}``, a bad grant type ``400 unsupported_grant_type``, a
  missing parameter ``400 invalid_request``, no grantable scope ``400 invalid_scope``.
- Key set (Security Framework section 6.3 "Key distribution"): ``GET /jwks``, the platform's public keys.
- Every service call (Security Framework section 4.1; RFC 6750 section 3.1): ``Authorization: Bearer <token>``; a
  missing, unknown or expired token is ``401`` (``WWW-Authenticate: Bearer error="invalid_token"``), a token without
  the scope the call needs is ``403`` (``error="insufficient_scope"``). The scopes and the methods each allows: AGS
  2.0 section 3.2 (``lineitem``: line items GET, POST, PUT, DELETE; ``lineitem.readonly``: GET), 3.3.2
  (``result.readonly``), 3.4.2 (``score``); NRPS 2.0 "Names and Role Provisioning Service" claim
  (``contextmembership.readonly``).
- Line items (AGS 2.0 section 3.2): ``GET /lineitems`` (media type
  ``application/vnd.ims.lis.v2.lineitemcontainer+json``, section 3.2.1: a JSON array, empty when nothing matches)
  with the filters ``resource_link_id``, ``resource_id``, ``tag`` and ``limit``, paged by a ``Link`` header with
  ``rel="next"`` (section 3.2.4); ``POST /lineitems`` (``application/vnd.ims.lis.v2.lineitem+json``, section 3.2.5)
  answers ``201`` with the line item and its ``id``; ``label`` (section 3.2.7) and ``scoreMaximum`` > 0 (section
  3.2.8) are required, else ``400``; a ``resourceLinkId`` the course does not hold is ``404`` (section 3.2.9);
  ``resourceId`` and ``tag`` are kept as sent (section 3.2.5). ``GET``/``PUT``/``DELETE /lineitems/<n>`` (the id,
  section 3.2.3); a PUT replaces the definition but may not change ``id`` or ``resourceLinkId`` (section 3.2.6:
  ``400``).
- Scores (AGS 2.0 section 3.4): ``POST /lineitems/<n>/scores`` (section 3.4.1; media type
  ``application/vnd.ims.lis.v1.score+json``, section 3.4.3, else ``415``): ``scoreGiven`` 0 or more with
  ``scoreMaximum`` > 0 (section 3.4.4), ``userId`` (3.4.5), ``activityProgress`` (3.4.7) and ``gradingProgress``
  (3.4.8) from their vocabularies, ``timestamp`` in ISO 8601 with sub-second precision and a time zone (3.4.9),
  ``submission`` times likewise (3.4.10), ``comment`` a string (3.4.11); a malformed score is ``400``. A timestamp
  not later than the last one on record for that line item and user is ``409`` and changes nothing (3.4.9: "The
  platform MUST NOT update a result if the last timestamp on record is later than the incoming score update", and
  "A tool MUST NOT send multiple score updates of the same (line item, user) with the same timestamp"). A user who
  is not an active student of the course is ``422 {"errors": {"type": "unprocessable_entity", "message": "User not
  found in course or is not a student"}}``, as Canvas answers (canvas-lms app/controllers/lti/ims/
  scores_controller.rb, ``verify_user_in_context``). Accepted: ``200 {"resultUrl": ...}``, as Canvas answers.
- Results (AGS 2.0 section 3.3): ``GET /lineitems/<n>/results`` (section 3.3.1; media type
  ``application/vnd.ims.lis.v2.resultcontainer+json``, 3.3.4) with the ``user_id`` and ``limit`` filters (3.3.6);
  a result per user with a score on record, ``resultScore`` being ``scoreGiven`` re-scaled to the line item's
  ``scoreMaximum`` (3.4.4), ``comment`` the latest score's (3.4.11).
- Memberships (NRPS 2.0, "Membership container media type", "Limit query parameter", "Role query parameter"): ``GET
  /memberships`` (media type ``application/vnd.ims.lti-nrps.v2.membershipcontainer+json``) answers ``{"id",
  "context", "members"}``, each member with ``user_id``, ``roles`` and ``status`` at least, paged by ``limit``
  (else ``page_size``) and a ``Link`` header with ``rel="next"``; ``role`` filters by a full or short role name.

Built on lti1p3platform 0.1.8 (``LTI1P3PlatformConfAbstract``, ``Registration``): its key set lookup by ``kid``
(from a JWKS dict or a JWKS URL), its token signing and verification. Where it falls short it is wrapped, each place
saying why: it checks neither the assertion's ``aud``, ``iss``/``sub`` nor ``jti`` reuse, nor its
``client_assertion_type``; its tokens always live 3600 s; its ``validate_token`` accepts ANY of a service's scopes,
not the one a call needs; its service handlers put paging in the body instead of a ``Link`` header.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
import threading
import time
import uuid
from collections.abc import Iterable
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwcrypto.jwk import JWK
from lti1p3platform.constants import LTI_1P3_ACCESS_TOKEN_REQUIRED_CLAIMS, LTI_1P3_ACCESS_TOKEN_SCOPES
from lti1p3platform.exceptions import LtiException
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
from lti1p3platform.membership import Context, ContextMembership, Status
from lti1p3platform.registration import Registration
from lti1p3platform.score import ActivityProgress, GradeProgress
from lti1p3platform.utils import dataclass_to_dict

# The scopes (AGS 2.0 sections 3.2, 3.3.2, 3.4.2; NRPS 2.0)
LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
LINEITEM_READONLY = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem.readonly"
RESULT_READONLY = "https://purl.imsglobal.org/spec/lti-ags/scope/result.readonly"
SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
MEMBERSHIPS = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"

# The media types (AGS 2.0 sections 3.2.1, 3.3.4, 3.4.3; NRPS 2.0 "Membership container media type")
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINEITEMS_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
RESULTS_TYPE = "application/vnd.ims.lis.v2.resultcontainer+json"
MEMBERSHIPS_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"  # RFC 7523 section 2.2
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"  # LTI 1.3 core, appendix A.2.3
NOT_A_STUDENT = {"errors": {"type": "unprocessable_entity",
                            "message": "User not found in course or is not a student"}}  # Canvas's answer
# ISO 8601 with a time zone designator (AGS 2.0 section 3.4.9: sub-second precision and a zone are required)
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+(Z|[+-]\d\d(:?\d\d)?)$")
DATETIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d(:?\d\d)?)$")  # sections 3.2.12-13


def tool_key() -> tuple[str, dict]:
    """A fresh RSA key for a tool: its private key (PKCS#8 PEM) and its public key set ``{"keys": [jwk]}``, the
    JWK with ``kid`` (its RFC 7638 thumbprint), ``alg`` RS256 and ``use`` sig."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    jwk = JWK.from_pem(pem.encode())
    public = json.loads(jwk.export_public())
    public.update(kid=jwk.thumbprint(), alg="RS256", use="sig")
    return pem, {"keys": [public]}


@functools.cache
def _platform_key() -> tuple[str, str]:
    """The platforms' key pair (private, public PEM): one per process, as making one costs ~0.1-0.5 s here. A
    token one platform issued is still refused by another, which did not issue it (``check_token``)."""
    private_pem, _ = tool_key()
    public_pem = serialization.load_pem_private_key(private_pem.encode(), None).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private_pem, public_pem


class TokenError(Exception):
    """The token endpoint's refusal: an RFC 6749 section 5.2 error code and the HTTP status to answer it with."""

    def __init__(self, status: int, error: str, description: str):
        super().__init__(description)
        self.status, self.error, self.description = status, error, description


class _Conf(LTI1P3PlatformConfAbstract):
    """lti1p3platform's platform configuration: one registration (the tool), the platform's key pair."""

    def init_platform_config(self, **kwargs) -> None:
        registration = Registration()
        registration.set_iss(kwargs["issuer"]).set_client_id(kwargs["client_id"])
        registration.set_deployment_id(kwargs["deployment_id"])
        registration.set_platform_private_key(kwargs["private_key"])
        registration.set_platform_public_key(kwargs["public_key"])
        if isinstance(kwargs["tool_jwks"], str):
            registration.set_tool_key_set_url(kwargs["tool_jwks"])  # fetched on first use, by lti1p3platform
        else:
            registration.set_tool_key_set(kwargs["tool_jwks"])
        self._registration = registration
        self.audiences: list[str] = kwargs["audiences"]

    def get_registration_by_params(self, **kwargs) -> Registration:
        assert self._registration is not None
        return self._registration

    def tool_validate_and_decode(self, jwt_token_string: str) -> dict:
        """Replaces lti1p3platform's (which turns ``verify_aud`` off and requires no claim): the assertion's
        signature against the tool's key (found by ``kid`` through lti1p3platform), and Security Framework 1.0
        section 4.1.1's claims: ``iss``, ``sub``, ``aud``, ``iat``, ``exp`` (in the future) and ``jti`` present,
        ``aud`` the token URL (or the configured audience), ``iss`` and ``sub`` the client id.

        Raises ``LtiException`` (no kid, unknown key) or a ``jwt.PyJWTError``."""
        self.validate_jwt_format(jwt_token_string)
        public_key = self.get_tool_public_key()
        client_id = self.get_registration().get_client_id()
        return jwt.decode(jwt_token_string, public_key, algorithms=["RS256"], audience=self.audiences,
                          issuer=client_id, subject=client_id,
                          options={"require": ["iss", "sub", "aud", "iat", "exp", "jti"]})


class LocalPlatform:
    """One course on an LTI 1.3 Advantage platform, served on 127.0.0.1 (a context manager: entering starts the
    server, leaving stops it). ``tool_jwks`` is the tool's public key set, as a JWKS dict or the URL of one.

    State the tests read: ``line_items`` (id, its URL -> the line item as stored), ``scores``/``result`` (what
    the score service accepted), ``requests`` ((method, path, status) of every request answered, the path
    without its query), ``tokens_issued``, ``connections`` (TCP connections accepted). Faults the tests
    inject: ``expire_tokens``, ``fail_next``, ``refuse_scope``. ``audience`` is a second ``aud`` the token
    endpoint accepts in an assertion besides the token URL (Security Framework 1.0 section 4.1.1).
    """

    def __init__(self, tool_jwks: dict | str, *, client_id: str = "transformer-course", deployment_id: str = "1",
                 members: list[dict] = (), token_lifetime_s: float = 3600.0, page_size: int = 50,
                 audience: str | None = None, resource_link_ids: Iterable[str] = ()):
        self.tool_jwks = tool_jwks
        self.client_id = client_id
        self.deployment_id = deployment_id
        self.token_lifetime_s = token_lifetime_s
        self.page_size = page_size
        self.audience = audience
        self.resource_link_ids = set(resource_link_ids)  # the course's resource links (AGS 2.0 section 3.2.9)
        self.context = Context(id="transformer-course-2026", label="TRANSFORMER", title="Building the Transformer")
        self.lock = threading.RLock()
        self.members: dict[str, dict] = {}
        for member in members:
            self.add_member(member)
        self.line_items: dict[str, dict] = {}
        self._scores: dict[tuple[str, str], list[dict]] = {}
        self.requests: list[tuple[str, str, int]] = []
        self.tokens_issued = 0
        self.connections = 0  # TCP connections accepted
        self._tokens: dict[str, dict] = {}  # access token -> {"exp": wall time, "scopes": set}
        self._jtis: dict[str, float] = {}  # assertion jti -> its exp (kept until then: a replay is refused)
        self._refused: set[str] = set()
        self._faults: list[dict] = []
        self._ids = itertools.count(1)
        self.server: ThreadingHTTPServer | None = None
        self.conf: _Conf | None = None
        self.issuer = self.token_url = self.jwks_url = self.lineitems_url = self.memberships_url = ""

    # Lifecycle ----------------------------------------------------------------------------------------

    def __enter__(self) -> LocalPlatform:
        platform = self

        class Handler(_Handler):
            lti = platform

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.issuer, self.token_url, self.jwks_url = base, f"{base}/token", f"{base}/jwks"
        self.lineitems_url, self.memberships_url = f"{base}/lineitems", f"{base}/memberships"
        private_pem, public_pem = _platform_key()
        self.conf = _Conf(issuer=self.issuer, client_id=self.client_id, deployment_id=self.deployment_id,
                          private_key=private_pem, public_key=public_pem, tool_jwks=self.tool_jwks,
                          audiences=[self.token_url] + ([self.audience] if self.audience else []))
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, name="lti-platform",
                         daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    # What the tests read and do ----------------------------------------------------------------------

    def trust(self, tool_jwks: dict | str) -> None:
        """Register the tool's key set (a JWKS dict or its URL) after the platform started: the tool's
        registration needs the platform's addresses first, as an LMS administrator registers a key made for
        that LMS."""
        with self.lock:
            self.tool_jwks = tool_jwks
            registration = self.conf.get_registration()
            if isinstance(tool_jwks, str):
                registration.set_tool_key_set_url(tool_jwks)
            else:
                registration.set_tool_key_set(tool_jwks)

    def add_member(self, member: dict) -> None:
        """Enrol ``member`` (NRPS 2.0 membership container: ``user_id`` and ``roles`` required; ``status`` defaults to
        Active). Raises ``ValueError`` when ``user_id`` or ``roles`` is missing."""
        for required in ("user_id", "roles"):
            if required not in member:
                raise ValueError(f"a member needs {required!r} (NRPS 2.0 membership container), "
                                 f"got keys {sorted(member)}")
        with self.lock:
            self.members[str(member["user_id"])] = {"status": Status.ACTIVE.value, **member}

    def scores(self, line_item_id: str, user_id: str) -> list[dict]:
        """Every score the score service accepted for this line item and user, in order."""
        with self.lock:
            return list(self._scores.get((line_item_id, str(user_id)), []))

    def result(self, line_item_id: str, user_id: str) -> dict | None:
        """The latest accepted score for this line item and user, or None."""
        scores = self.scores(line_item_id, user_id)
        return scores[-1] if scores else None

    def line_item(self, *, resource_id: str | None = None, tag: str | None = None) -> dict | None:
        """The first line item with this ``resourceId`` and/or ``tag`` (each one given must match), or None."""
        with self.lock:
            for item in self.line_items.values():
                if (resource_id is None or item.get("resourceId") == resource_id) and (
                        tag is None or item.get("tag") == tag):
                    return item
        return None

    def expire_tokens(self) -> None:
        """Every access token issued so far is expired from now on (401 on use)."""
        with self.lock:
            for token in self._tokens.values():
                token["exp"] = 0.0

    def fail_next(self, status: int, times: int = 1, *, retry_after: float | None = None,
                  path_contains: str = "") -> None:
        """The next ``times`` requests whose path contains ``path_contains`` answer ``status`` (with a
        ``Retry-After`` header when ``retry_after`` is given), before any other check."""
        with self.lock:
            self._faults.append({"status": status, "times": times, "retry_after": retry_after,
                                 "path_contains": path_contains})

    def refuse_scope(self, scope: str) -> None:
        """The token endpoint never grants ``scope`` from now on (RFC 6749 section 3.3: it grants the others)."""
        with self.lock:
            self._refused.add(scope)

    # The token endpoint (Security Framework 1.0 section 4.1) ---------------------------------------------

    def issue_token(self, form: dict[str, str]) -> dict:
        """An access token for a client-credentials grant with a JWT assertion. Replaces lti1p3platform's
        ``get_access_token``, which checks neither ``client_assertion_type``, ``aud``, ``iss``/``sub`` nor
        ``jti`` reuse, and always grants 3600 s; it reuses its claim list, scope list and key lookup.

        Raises ``TokenError`` (invalid_request, unsupported_grant_type, invalid_client, invalid_scope)."""
        assert self.conf is not None
        missing = sorted(LTI_1P3_ACCESS_TOKEN_REQUIRED_CLAIMS - form.keys())
        if missing:
            raise TokenError(400, "invalid_request", f"missing parameter(s): {', '.join(missing)}")
        if form["grant_type"] != "client_credentials":
            raise TokenError(400, "unsupported_grant_type", "grant_type must be client_credentials")
        if form["client_assertion_type"] != ASSERTION_TYPE:
            raise TokenError(400, "invalid_request", f"client_assertion_type must be {ASSERTION_TYPE}")
        with self.lock:  # lti1p3platform keeps the JWT being checked on the instance: one at a time
            try:
                claims = self.conf.tool_validate_and_decode(form["client_assertion"])
            except (LtiException, jwt.PyJWTError) as error:
                # The reason names a claim or the key, never the assertion itself
                raise TokenError(401, "invalid_client", f"client assertion refused: {error}") from None
            now = time.time()
            self._jtis = {jti: exp for jti, exp in self._jtis.items() if exp >= now}
            if claims["jti"] in self._jtis:  # RFC 7523 section 3 item 7: a jti is used once
                raise TokenError(401, "invalid_client", "client assertion refused: its jti was used before")
            self._jtis[claims["jti"]] = float(claims["exp"])
            requested = form["scope"].split()
            granted = [s for s in requested if s in LTI_1P3_ACCESS_TOKEN_SCOPES and s not in self._refused]
            if not granted:
                raise TokenError(400, "invalid_scope", f"none of the requested scopes is granted: {requested}")
            exp = now + self.token_lifetime_s
            registration = self.conf.get_registration()
            # no "aud": lti1p3platform's validate_token decodes without an audience, so PyJWT would refuse one
            token = registration.platform_encode_and_sign({
                "iss": self.issuer, "sub": self.client_id, "iat": int(now),
                "exp": math.ceil(exp), "jti": str(uuid.uuid4()), "scope": " ".join(granted)})
            self._tokens[token] = {"exp": exp, "scopes": set(granted)}
            self.tokens_issued += 1
        lifetime = self.token_lifetime_s
        return {"access_token": token, "token_type": "Bearer",
                "expires_in": int(lifetime) if lifetime == int(lifetime) else lifetime, "scope": " ".join(granted)}

    def check_token(self, authorization: str, scopes: tuple[str, ...]) -> tuple[int, str] | None:
        """None when the bearer token is live and holds one of ``scopes``, else (status, error): 401
        invalid_token, 403 insufficient_scope. Wraps lti1p3platform's ``validate_token`` (signature, issuer,
        expiry) with what it lacks: the token must be one this platform issued and has not expired since
        (``expire_tokens``, lifetimes under a second), and must carry the scope THIS call needs (it accepts any
        of a service's scopes)."""
        assert self.conf is not None
        kind, _, token = authorization.partition(" ")
        if kind.lower() != "bearer" or not token:
            return 401, "invalid_token"
        with self.lock:
            record = self._tokens.get(token)
        if record is None:
            return 401, "invalid_token"
        if not record.get("verified"):
            try:
                if not self.conf.validate_token(token):
                    return 401, "invalid_token"
            except (LtiException, jwt.PyJWTError):
                return 401, "invalid_token"
            record["verified"] = True  # the same bytes verify the same way: once is enough
        if record["exp"] <= time.time():
            return 401, "invalid_token"
        if not record["scopes"] & set(scopes):
            return 403, "insufficient_scope"
        return None

    def take_fault(self, path: str) -> dict | None:
        """The injected fault this request answers, if any (``fail_next``)."""
        with self.lock:
            for fault in self._faults:
                if fault["path_contains"] in path:
                    fault["times"] -= 1
                    if fault["times"] <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    # AGS 2.0 ----------------------------------------------------------------------------------------------

    def create_line_item(self, body: dict) -> dict:
        """Store a new line item (AGS 2.0 section 3.2.5). Raises ``ValueError`` for a malformed one (sections 3.2.7,
        3.2.8) and ``LookupError`` for a ``resourceLinkId`` the course does not hold (section 3.2.9)."""
        item = _line_item_fields(body)
        if "resourceLinkId" in item and item["resourceLinkId"] not in self.resource_link_ids:
            raise LookupError("no such resource link in this course (AGS 2.0 section 3.2.9)")
        with self.lock:
            item = {"id": f"{self.lineitems_url}/{next(self._ids)}", **item}
            self.line_items[item["id"]] = item
        return item

    def post_score(self, line_item_id: str, body: dict) -> tuple[int, dict]:
        """Apply a score (AGS 2.0 section 3.4); returns the status and the answer."""
        try:
            score = _score_fields(body)
        except ValueError as error:
            return 400, {"error": "invalid_request", "error_description": str(error)}
        user_id = score["userId"]
        with self.lock:
            item = self.line_items.get(line_item_id)
            if item is None:
                return 404, {"error": "not_found", "error_description": "no such line item"}
            member = self.members.get(user_id)
            if member is None or member.get("status") != Status.ACTIVE.value or not _is_learner(member):
                return 422, NOT_A_STUDENT
            history = self._scores.setdefault((line_item_id, user_id), [])
            if history and _when(score["timestamp"]) <= _when(history[-1]["timestamp"]):
                return 409, {"error": "conflict", "error_description":
                             f"timestamp {score['timestamp']} is not later than the last one on record, "
                             f"{history[-1]['timestamp']} (AGS 2.0 section 3.4.9)"}
            history.append(score)
        return 200, {"resultUrl": f"{line_item_id}/results/{user_id}"}

    def results(self, line_item_id: str, user_id: str | None) -> list[dict] | None:
        """The result of each user with an accepted score (AGS 2.0 section 3.3), ``user_id`` only if given;
        None when there is no such line item."""
        with self.lock:
            item = self.line_items.get(line_item_id)
            if item is None:
                return None
            out = []
            for (item_id, uid), history in self._scores.items():
                if item_id != line_item_id or not history or (user_id is not None and uid != user_id):
                    continue
                score = history[-1]
                result = {"id": f"{line_item_id}/results/{uid}", "scoreOf": line_item_id, "userId": uid,
                          "resultMaximum": item["scoreMaximum"]}
                if score.get("scoreGiven") is not None:  # section 3.4.4: re-scaled to the line item's maximum
                    result["resultScore"] = score["scoreGiven"] * item["scoreMaximum"] / score["scoreMaximum"]
                if score.get("comment") is not None:
                    result["comment"] = score["comment"]
                out.append(result)
        return out


def _line_item_fields(body: object) -> dict:
    """The fields of a line item (AGS 2.0 sections 3.2.7 to 3.2.14). Raises ValueError naming the bad field."""
    if not isinstance(body, dict):
        raise ValueError("a line item is a JSON object")
    label, maximum = body.get("label"), body.get("scoreMaximum")
    if not isinstance(label, str) or not label.strip():
        raise ValueError("label is required, a non-empty string (AGS 2.0 section 3.2.7)")
    if isinstance(maximum, bool) or not isinstance(maximum, int | float) or maximum <= 0:
        raise ValueError("scoreMaximum is required, a number greater than 0 (AGS 2.0 section 3.2.8)")
    item = {"label": label, "scoreMaximum": maximum}
    for key in ("resourceId", "tag", "resourceLinkId", "startDateTime", "endDateTime"):
        if body.get(key) is not None:
            if not isinstance(body[key], str):
                raise ValueError(f"{key} must be a string")
            item[key] = body[key]
    for key in ("startDateTime", "endDateTime"):  # sections 3.2.12, 3.2.13: ISO 8601 with a time zone
        if key in item and not DATETIME.match(item[key]):
            raise ValueError(f"{key} must be ISO 8601 with a time zone designator (AGS 2.0 section 3.2.12)")
    if "gradesReleased" in body:
        item["gradesReleased"] = bool(body["gradesReleased"])
    return item


def _score_fields(body: object) -> dict:
    """A score checked against AGS 2.0 section 3.4. Raises ValueError naming the bad field."""
    if not isinstance(body, dict):
        raise ValueError("a score is a JSON object")
    if body.get("userId") in (None, ""):
        raise ValueError("userId is required (AGS 2.0 section 3.4.5)")
    timestamp = body.get("timestamp")
    if not isinstance(timestamp, str) or not TIMESTAMP.match(timestamp):
        raise ValueError("timestamp is required, ISO 8601 with sub-second precision and a time zone "
                         "(AGS 2.0 section 3.4.9)")
    activity, grading = body.get("activityProgress"), body.get("gradingProgress")
    if activity not in {p.value for p in ActivityProgress}:
        raise ValueError(f"activityProgress {activity!r} is not one of {[p.value for p in ActivityProgress]}")
    if grading not in {p.value for p in GradeProgress}:
        raise ValueError(f"gradingProgress {grading!r} is not one of {[p.value for p in GradeProgress]}")
    given, maximum = body.get("scoreGiven"), body.get("scoreMaximum")
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int | float) or given < 0:
            raise ValueError("scoreGiven must be a number, 0 or more (AGS 2.0 section 3.4.4)")
        if isinstance(maximum, bool) or not isinstance(maximum, int | float) or maximum <= 0:
            raise ValueError("scoreMaximum is required with scoreGiven, a number greater than 0 "
                             "(AGS 2.0 section 3.4.4)")
    submission = body.get("submission")
    if submission is not None:  # section 3.4.10: the same format as the timestamp
        if not isinstance(submission, dict):
            raise ValueError("submission must be a JSON object (AGS 2.0 section 3.4.10)")
        for key in ("startedAt", "submittedAt"):
            if submission.get(key) is not None and not (isinstance(submission[key], str)
                                                        and TIMESTAMP.match(submission[key])):
                raise ValueError(f"submission.{key} must be ISO 8601 with sub-second precision and a time zone "
                                 "(AGS 2.0 section 3.4.10)")
    if body.get("comment") is not None and not isinstance(body["comment"], str):
        raise ValueError("comment must be a string (AGS 2.0 section 3.4.11)")
    return {**body, "userId": str(body["userId"])}


def _when(timestamp: str) -> datetime:
    """An AGS timestamp as an aware datetime (``+00`` without minutes, which AGS allows, padded; digits past
    microseconds, which datetime cannot hold, cut)."""
    timestamp = re.sub(r"(\.\d{6})\d+", r"\1", timestamp.replace("Z", "+00:00"))
    if re.search(r"[+-]\d\d$", timestamp):
        timestamp += ":00"
    return datetime.fromisoformat(timestamp)


def _is_learner(member: dict) -> bool:
    """Whether the member is a student: a Learner role, context or short form (LTI 1.3 core, appendix A.2.3)."""
    return any(role == LEARNER or role.endswith("#Learner") or role == "Learner" for role in member["roles"])


class _Handler(BaseHTTPRequestHandler):
    lti: LocalPlatform
    protocol_version = "HTTP/1.1"  # keep-alive: every answer carries Content-Length
    disable_nagle_algorithm = True  # headers and body are two writes: without it each answer waits ~40 ms

    def log_message(self, format, *args):  # quiet; the tests read LocalPlatform.requests
        pass

    def setup(self):
        super().setup()
        with self.lti.lock:
            self.lti.connections += 1  # the tests see keep-alive at work

    def do_GET(self):
        self._serve("GET")

    def do_POST(self):
        self._serve("POST")

    def do_PUT(self):
        self._serve("PUT")

    def do_DELETE(self):
        self._serve("DELETE")

    # Plumbing --------------------------------------------------------------------------------------------

    def _serve(self, method: str) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        fault = self.lti.take_fault(parts.path)
        if fault is not None:
            headers = {} if fault["retry_after"] is None else {"Retry-After": _seconds(fault["retry_after"])}
            self._send(method, parts.path, fault["status"], {"error": "injected fault"}, headers=headers)
            return
        try:
            status, answer, media, headers = self._route(method, parts, body)
        except Exception as error:  # a bug here must show as a 500 the test sees, not a dropped connection
            status, answer, media, headers = 500, {"error": "server_error",
                                                   "error_description": type(error).__name__}, None, {}
        self._send(method, parts.path, status, answer, media, headers)

    def _send(self, method: str, path: str, status: int, answer: object, media: str | None = None,
              headers: dict[str, str] | None = None) -> None:
        data = b"" if answer is None else json.dumps(answer).encode()
        with self.lti.lock:
            self.lti.requests.append((method, path, status))
        self.send_response(status)
        if answer is not None:
            self.send_header("Content-Type", media or "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if data:
            self.wfile.write(data)

    def _json(self, body: bytes) -> object:
        try:
            return json.loads(body or b"null")
        except ValueError:
            return None

    def _media(self) -> str:
        return self.headers.get("Content-Type", "").split(";")[0].strip().lower()

    def _auth(self, *scopes: str) -> tuple | None:
        """None when the call may go on, else the answer: 401 or 403 with RFC 6750's WWW-Authenticate."""
        refused = self.lti.check_token(self.headers.get("Authorization", ""), scopes)
        if refused is None:
            return None
        status, error = refused
        challenge = f'Bearer error="{error}"' + (f', scope="{" ".join(scopes)}"' if status == 403 else "")
        description = "the access token is missing, unknown or expired" if status == 401 else \
            f"the access token lacks the scope this call needs: {' or '.join(scopes)}"
        return status, {"error": error, "error_description": description}, None, {"WWW-Authenticate": challenge}

    def _page(self, url: str, query: dict[str, str], items: list, default: int | None) -> tuple[list, dict]:
        """One page of ``items`` by ``limit`` (else ``default``) and ``page``, with RFC 8288 ``Link`` headers
        (AGS 2.0 sections 3.2.4 and 3.3.6, NRPS 2.0 "Limit query parameter")."""
        limit = int(query["limit"]) if query.get("limit", "").isdigit() and int(query["limit"]) > 0 else default
        if limit is None:
            return items, {}
        page = int(query["page"]) if query.get("page", "").isdigit() and int(query["page"]) > 0 else 1
        last = max(1, math.ceil(len(items) / limit))

        def link(n: int) -> str:
            return f"{url}?{urlencode({**query, 'limit': limit, 'page': n})}"

        links = [f'<{link(1)}>; rel="first"', f'<{link(last)}>; rel="last"']
        if page < last:
            links.insert(0, f'<{link(page + 1)}>; rel="next"')
        if page > 1:
            links.append(f'<{link(page - 1)}>; rel="prev"')
        return items[(page - 1) * limit:page * limit], {"Link": ", ".join(links)}

    def _route(self, method: str, parts, body: bytes) -> tuple[int, object, str | None, dict]:
        lti = self.lti
        path, query = parts.path.rstrip("/"), dict(parse_qsl(parts.query))
        if path == "/token" and method == "POST":
            try:
                answer = lti.issue_token(dict(parse_qsl(body.decode("utf-8", "replace"))))
            except TokenError as error:
                headers = {"WWW-Authenticate": 'Bearer error="invalid_client"'} if error.status == 401 else {}
                return error.status, {"error": error.error, "error_description": error.description}, None, headers
            return 200, answer, None, {"Cache-Control": "no-store"}  # RFC 6749 section 5.1
        if path == "/jwks" and method == "GET":
            assert lti.conf is not None
            return 200, lti.conf.get_jwks(), None, {}
        if path == "/memberships" and method == "GET":
            return self._memberships(query)
        if path == "/lineitems":
            return self._line_items(method, query, body)
        match = re.fullmatch(r"(/lineitems/\d+)(/scores|/results)?", path)
        if match:
            line_item_id = f"{lti.issuer}{match.group(1)}"
            if match.group(2) == "/scores" and method == "POST":
                return self._score(line_item_id, body)
            if match.group(2) == "/results" and method == "GET":
                return self._results(line_item_id, query)
            if match.group(2) is None and method in ("GET", "PUT", "DELETE"):
                return self._line_item(method, line_item_id, body)
            return 405, {"error": "method_not_allowed"}, None, {}
        return 404, {"error": "not_found"}, None, {}

    def _memberships(self, query: dict[str, str]):
        """NRPS 2.0: the context and its members, ``role`` filtered ("Role query parameter"), paged."""
        refused = self._auth(MEMBERSHIPS)
        if refused:
            return refused
        lti = self.lti
        with lti.lock:
            members = [dict(m) for m in lti.members.values()
                       if not query.get("role") or any(query["role"] in (r, r.rpartition("#")[2])
                                                       for r in m["roles"])]
        page, headers = self._page(lti.memberships_url, query, members, lti.page_size)
        container = dataclass_to_dict(ContextMembership(id=lti.memberships_url, context=lti.context))
        return 200, {**container, "members": page}, MEMBERSHIPS_TYPE, headers

    def _line_items(self, method: str, query: dict[str, str], body: bytes):
        """AGS 2.0 section 3.2: the line items container, GET (filtered, paged) and POST (create)."""
        lti = self.lti
        if method == "GET":
            refused = self._auth(LINEITEM, LINEITEM_READONLY)
            if refused:
                return refused
            filters = {"resourceId": query.get("resource_id"), "resourceLinkId": query.get("resource_link_id"),
                       "tag": query.get("tag")}
            with lti.lock:
                items = [dict(item) for item in lti.line_items.values()
                         if all(value is None or item.get(key) == value for key, value in filters.items())]
            page, headers = self._page(lti.lineitems_url, query, items, None)
            return 200, page, LINEITEMS_TYPE, headers
        if method == "POST":
            refused = self._auth(LINEITEM)
            if refused:
                return refused
            if self._media() not in (LINEITEM_TYPE, "application/json"):
                return 415, {"error": "unsupported_media_type", "error_description": f"expected {LINEITEM_TYPE}"}, \
                    None, {}
            try:
                item = lti.create_line_item(self._json(body))
            except ValueError as error:
                return 400, {"error": "invalid_request", "error_description": str(error)}, None, {}
            except LookupError as error:
                return 404, {"error": "not_found", "error_description": str(error)}, None, {}
            return 201, item, LINEITEM_TYPE, {"Location": item["id"]}
        return 405, {"error": "method_not_allowed"}, None, {}

    def _line_item(self, method: str, line_item_id: str, body: bytes):
        """AGS 2.0 section 3.2.3: one line item, GET, PUT (section 3.2.6: replace; ``id`` and ``resourceLinkId``
        kept) and DELETE."""
        lti = self.lti
        refused = self._auth(LINEITEM, LINEITEM_READONLY) if method == "GET" else self._auth(LINEITEM)
        if refused:
            return refused
        with lti.lock:
            item = lti.line_items.get(line_item_id)
            if item is None:
                return 404, {"error": "not_found", "error_description": "no such line item"}, None, {}
            if method == "GET":
                return 200, dict(item), LINEITEM_TYPE, {}
            if method == "DELETE":
                del lti.line_items[line_item_id]
                return 204, None, None, {}
            sent = self._json(body)
            try:
                fields = _line_item_fields(sent)
                for key, kept in (("id", line_item_id), ("resourceLinkId", item.get("resourceLinkId"))):
                    if key in sent and sent[key] != kept:  # section 3.2.6: a tool MUST NOT change them
                        raise ValueError(f"{key} may not change (AGS 2.0 section 3.2.6)")
            except ValueError as error:
                return 400, {"error": "invalid_request", "error_description": str(error)}, None, {}
            if "resourceLinkId" in item:
                fields["resourceLinkId"] = item["resourceLinkId"]
            lti.line_items[line_item_id] = updated = {"id": line_item_id, **fields}
            return 200, dict(updated), LINEITEM_TYPE, {}

    def _score(self, line_item_id: str, body: bytes):
        refused = self._auth(SCORE)
        if refused:
            return refused
        if self._media() != SCORE_TYPE:  # AGS 2.0 section 3.4.3
            return 415, {"error": "unsupported_media_type", "error_description": f"expected {SCORE_TYPE}"}, None, {}
        status, answer = self.lti.post_score(line_item_id, self._json(body))
        return status, answer, None, {}

    def _results(self, line_item_id: str, query: dict[str, str]):
        refused = self._auth(RESULT_READONLY)
        if refused:
            return refused
        results = self.lti.results(line_item_id, query.get("user_id"))
        if results is None:
            return 404, {"error": "not_found", "error_description": "no such line item"}, None, {}
        page, headers = self._page(f"{line_item_id}/results", query, results, None)
        return 200, page, RESULTS_TYPE, headers


def _seconds(value: float) -> str:
    """A Retry-After value (RFC 9110 section 10.2.3: delay-seconds, a whole number)."""
    return str(math.ceil(value))
