"""``transformer-course lti``: grades into any LMS through LTI 1.3 Advantage, as a tool the LMS registers.

``lti init DIR``
    The tool's key pair (``DIR/private.pem``, mode 0600, never leaves the machine; ``DIR/jwks.json``, its
    public half as a JSON Web Key Set), ``DIR/tool.toml`` (the platform's addresses and ids, to fill in from
    the LMS's registration) and the documents an LMS administrator registers it with:
    ``DIR/canvas-developer-key.json`` (Canvas's "LTI Key" JSON) and ``DIR/moodle.txt`` (Moodle's fields).
``lti check DIR [--online]``
    ``tool.toml`` read and every field checked; with ``--online``, a token asked for each scope.
``lti roster DIR OUT``
    The course's members (Names and Role Provisioning Services 2.0) matched to the course's student ids,
    written to ``DIR/roster.csv``: the mapping the instructor reads and corrects (:func:`match`).
``lti push DIR OUT --assignment NAME [--dry-run] [--feedback-url TEMPLATE]``
    One line item per assignment (Assignment and Grade Services 2.0), found by its ``resourceId`` (the
    assignment's name) or created with the notebook's maximum; one score per matched student
    (:func:`score_of`); sent only where it differs from the last one sent (``OUT/lti-log.jsonl``).

The tool's access token comes from the client-credentials grant (IMS Security Framework 1.0, section 4.1):
a JWT assertion signed with the tool's key, exchanged at the platform's token URL for a token with the
scopes of :data:`SCOPES`. pylti1p3next signs and sends; :class:`Connector` adds what a long push needs: the
token kept until it expires and renewed on a ``401``, ``429`` and ``5xx`` answers sent again after the wait
the platform asks for (``Retry-After``) or a doubling one.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import stat
import sys
import threading
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from transformer_course.grading.output.atomic import atomic_write
from transformer_course.grading.output.spreadsheet import csv_text, read_rows
from transformer_course.instructors.roster import KEPT, STUDENTS_CSV, cleaned, for_run
from transformer_course.lms import push

SCOPE_LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
SCOPE_MEMBERS = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
# Why each: line items found and created (one per assignment); scores sent; members read to match students.
# result.readonly is not asked: what was sent is kept in the push's log, and the results service cannot
# tell PendingManual from FullyGraded.
SCOPES = {SCOPE_LINEITEM: "find the course's line items and create one per assignment",
          SCOPE_SCORE: "send each student's score, progress and comment",
          SCOPE_MEMBERS: "read the course's members, to match them to the course's student ids"}
AGS_SCOPES = [SCOPE_LINEITEM, SCOPE_SCORE]
TAG = "transformer-course"  # every line item this tool creates carries it
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
CONFIG = "tool.toml"
KEY = "private.pem"
JWKS = "jwks.json"
ROSTER = "roster.csv"  # in the tool's folder: the course's student ids and the LMS's users
ROSTER_HEADER = ["student_id", "lms_user_id", "name", "email", "sis_id", "matched_by"]
LEARNERS = "lms-learners.csv"  # in the tool's folder: every learner the LMS lists, matched or not
LEARNERS_HEADER = ["lms_user_id", "name", "email", "sis_id", "status", "student_id"]
BY_HAND = "by hand"  # matched_by of a row the instructor set: kept as it is by every `lti roster`
LOG = "lti-log.jsonl"  # in OUT: every score sent, to whom, and the platform's answer
FIELDS = {  # tool.toml: section -> field -> what it is, in the registration's words
    "platform": {"issuer": "the platform's issuer (Canvas: https://canvas.instructure.com; Moodle: its "
                           "'Platform ID')",
                 "client_id": "the tool's client id the LMS gave (Canvas: the developer key's id)",
                 "deployment_id": "the deployment id of the tool in this LMS",
                 "token_url": "the platform's OAuth 2 access token URL",
                 "keyset_url": "the platform's public key set URL"},
    "course": {"lineitems_url": "the course's line items URL (AGS; in a launch's "
                                "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint, 'lineitems')",
               "memberships_url": "the course's memberships URL (NRPS; in a launch's "
                                  "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice)"},
}
RETRIES = 6  # a throttled (429) or failing (5xx) request is sent again this many times, then it is an error
LONGEST_WAIT = 60.0  # seconds: a Retry-After asking for more stops the push (run it again later)


class LtiError(push.LmsError):
    """The LMS could not be used through LTI, in one line without any secret (see :class:`push.LmsError`)."""


# The tool's configuration ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tool:
    """``DIR/tool.toml`` read and checked, with the tool's private key."""

    folder: Path
    issuer: str
    client_id: str
    deployment_id: str
    token_url: str
    keyset_url: str
    lineitems_url: str
    memberships_url: str
    private_key: str = field(repr=False)
    public_key: str = field(repr=False)
    audience: str = ""  # the token URL where empty (Security Framework 4.1: "aud" is the token endpoint)


def _url(value: str, where: str) -> str:
    parts = urlsplit(value)
    local = parts.hostname in ("127.0.0.1", "localhost", "::1")
    if parts.scheme != "https" and not (parts.scheme == "http" and local):
        raise LtiError(f"{where} must be an https:// address (got {value!r}): tokens and grades must not "
                       "cross the network in clear")
    if not parts.hostname:
        raise LtiError(f"{where}: {value!r} is not an address")
    return value


def load(folder: Path) -> Tool:
    """The tool in ``folder`` (``lti init`` made it), every field checked.

    Raises:
        LtiError: ``tool.toml`` or the key is missing, a field is empty or not what it should be (the error
            names it and what it should hold), or the private key is readable by others than its owner.
    """
    path = folder / CONFIG
    if not path.is_file():
        raise LtiError(f"{path}: not there; make it with `transformer-course lti init {folder}`")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise LtiError(f"{path}: not TOML ({exc})") from None
    known = {section: {*fields, *(("audience",) if section == "platform" else ())}
             for section, fields in FIELDS.items()}
    for section, table in data.items():  # a misspelt key would otherwise read as an empty field
        if section not in known:
            raise LtiError(f"{path}: unknown section [{section}]; expected {', '.join(f'[{k}]' for k in known)}")
        unknown = sorted(set(table) - known[section]) if isinstance(table, dict) else []
        if unknown:
            raise LtiError(f"{path}: [{section}] has no field {', '.join(unknown)}; its fields are "
                           f"{', '.join(sorted(known[section]))}")
    values: dict[str, str] = {}
    for section, fields in FIELDS.items():
        for name, what in fields.items():
            value = data.get(section, {}).get(name, "") if isinstance(data.get(section), dict) else ""
            if not isinstance(value, str) or not value.strip():
                raise LtiError(f"{path}: [{section}] {name} is empty: it is {what} (docs/lti-admin.md)")
            values[name] = value.strip()
            if name.endswith("_url") or name == "issuer":  # LTI 1.3 core 5.1.2: the issuer is an https URL
                _url(values[name], f"{path}: [{section}] {name}")
    audience = str(data.get("platform", {}).get("audience", "") or "").strip()
    key_path = folder / KEY
    if not key_path.is_file():
        raise LtiError(f"{key_path}: the tool's private key is not there (made by `lti init`; a new one "
                       "must be registered again in the LMS)")
    if stat.S_IMODE(key_path.stat().st_mode) & 0o077:
        raise LtiError(f"{key_path}: others than its owner can read the tool's private key: "
                       f"`chmod 600 {key_path}`")
    private = key_path.read_text(encoding="utf-8")
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = serialization.load_pem_private_key(private.encode(), password=None)
    except (ValueError, TypeError):
        raise LtiError(f"{key_path}: not an unencrypted PEM private key") from None
    if not isinstance(key, rsa.RSAPrivateKey) or key.key_size < 2048:
        raise LtiError(f"{key_path}: LTI 1.3 signs with RS256: an RSA key of 2048 bits or more is needed")
    return Tool(folder, **values, private_key=private, public_key=_public_pem(key), audience=audience)


def _public_pem(key) -> str:
    """The public half of a ``cryptography`` private key, as PEM (SubjectPublicKeyInfo)."""
    from cryptography.hazmat.primitives import serialization

    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def jwks_of(public_pem: str) -> dict:
    """The JSON Web Key Set of a public key (RFC 7517), its ``kid`` the key's thumbprint (RFC 7638), as
    pylti1p3 puts in the assertion's header."""
    from pylti1p3.registration import Registration

    return {"keys": [dict(Registration.get_jwk(public_pem))]}


def _toml(value: str) -> str:
    return json.dumps(value)  # a TOML basic string is a JSON string for what these fields hold


def init(folder: Path, values: dict[str, str], title: str = "Transformer course grades",
         launch_url: str = "") -> list[Path]:
    """Make the tool in ``folder``: its key pair, ``tool.toml`` with ``values`` (empty fields to fill in) and
    the registration documents. Returns the files written.

    Raises:
        LtiError: ``folder`` already holds a key (a new key would undo the LMS's registration).
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key_path = folder / KEY
    if key_path.exists():
        raise LtiError(f"{key_path}: already there; the LMS knows its public half. Keep it, or remove the "
                       "folder and register the new key in the LMS")
    folder.mkdir(parents=True, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    # Made with mode 0600 from its first byte: never a moment when others could read it.
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    public = _public_pem(key)
    jwks = jwks_of(public)
    written = [key_path]
    atomic_write(folder / JWKS, json.dumps(jwks, indent=2) + "\n")
    written.append(folder / JWKS)
    lines = ["# The LTI 1.3 tool of this course: fill the empty fields from the LMS's registration",
             "# (docs/lti-admin.md), then `transformer-course lti check` this folder.", ""]
    for section, fields in FIELDS.items():
        lines.append(f"[{section}]")
        for name, what in fields.items():
            lines += [f"# {what}", f"{name} = {_toml(values.get(name, ''))}"]
        if section == "platform":
            lines += ["# the token request's audience, where the LMS wants other than the token URL (Moodle, "
                      "Canvas: leave it empty)", f"audience = {_toml(values.get('audience', ''))}"]
        lines.append("")
    config = folder / CONFIG
    if not config.exists():  # the instructor's filled-in fields are never overwritten
        atomic_write(config, "\n".join(lines))
        written.append(config)
    # Canvas: Developer Keys > + LTI Key > Method "Paste JSON" (Canvas's docs, "LTI 1.3 JSON configuration").
    # The tool receives no launch (grades flow from it to the LMS only), but Canvas asks for the addresses.
    target = launch_url or "https://github.com/transformer-course/transformer-course"
    canvas = {"title": title, "description": "Grades and feedback of the Transformer course's notebooks.",
              "target_link_uri": target, "oidc_initiation_url": target, "public_jwk": jwks["keys"][0],
              "scopes": list(SCOPES), "custom_fields": {},
              "extensions": [{"platform": "canvas.instructure.com", "privacy_level": "public",
                              "settings": {"placements": []}}]}
    atomic_write(folder / "canvas-developer-key.json", json.dumps(canvas, indent=2) + "\n")
    moodle = ["Moodle: Site administration > Plugins > Activity modules > External tool > Manage tools > "
              "configure a tool manually.",
              f"Tool name: {title}", f"Tool URL: {target}", "LTI version: LTI 1.3",
              "Public key type: RSA key", "Public key:", public.strip(),
              f"Initiate login URL: {target}", f"Redirection URI(s): {target}",
              "Services: IMS LTI Assignment and Grade Services: 'Use this service for grade sync and column "
              "management'; IMS LTI Names and Role Provisioning: 'Use this service to retrieve members' "
              "information as per privacy settings'",
              "Privacy: Share launcher's name with tool: Always; Share launcher's email with tool: Always", ""]
    atomic_write(folder / "moodle.txt", "\n".join(moodle))
    written += [folder / "canvas-developer-key.json", folder / "moodle.txt"]
    return written


# Talking to the platform ----------------------------------------------------------------------------------


def _retry():
    """urllib3's retry for every method: ``429`` and ``5xx`` sent again up to :data:`RETRIES` times, waiting
    what ``Retry-After`` asks (at most :data:`LONGEST_WAIT`) or urllib3's doubling backoff (1, 2, 4, ... s);
    the last answer is returned, not raised."""
    from urllib3.util.retry import Retry

    class Capped(Retry):
        def get_retry_after(self, response):
            wait = super().get_retry_after(response)
            if wait is not None and wait > LONGEST_WAIT:
                raise LtiError(f"the LMS asks to wait {wait:.0f} s before the next request: run the same "
                               "command again later (what was sent is kept)")
            return wait

    return Capped(total=RETRIES, backoff_factor=0.5, backoff_max=LONGEST_WAIT, allowed_methods=None,
                  status_forcelist=(429, 500, 502, 503, 504), respect_retry_after_header=True,
                  raise_on_status=False)


def connector(tool: Tool):
    """A pylti1p3 ``ServiceConnector`` for ``tool``: tokens kept until they expire (one per set of scopes),
    a ``401`` answered by a new token and the request sent once more, throttling waited out."""
    import requests
    from pylti1p3.exception import LtiServiceException
    from pylti1p3.registration import Registration
    from pylti1p3.service_connector import ServiceConnector

    registration = (Registration().set_issuer(tool.issuer).set_client_id(tool.client_id)
                    .set_auth_token_url(tool.token_url).set_key_set_url(tool.keyset_url)
                    .set_tool_private_key(tool.private_key).set_tool_public_key(tool.public_key))
    if tool.audience:
        registration.set_auth_audience(tool.audience)

    class Connector(ServiceConnector):
        def __init__(self):
            session = requests.Session()
            adapter = requests.adapters.HTTPAdapter(max_retries=_retry(), pool_maxsize=8)
            session.mount("https://", adapter)
            session.mount("http://", adapter)
            session.hooks["response"].append(self._granted)
            super().__init__(registration, session)
            self._tokens: dict[str, tuple[str, float]] = {}
            self._lock = threading.Lock()
            self.granted: set[str] = set()  # the scopes the platform granted in its last token
            self.refusal = ""  # the token endpoint's error code, where it refused the last request

        def _granted(self, response, *args, **kwargs):
            # The token's answer says which scopes it granted (RFC 6749 5.1), or none where it granted all
            # those asked: a refused one is named later.
            if response.request.url.split("?")[0].rstrip("/") == tool.token_url.split("?")[0].rstrip("/"):
                from urllib.parse import parse_qs

                body = response.request.body or ""
                asked = parse_qs(body if isinstance(body, str) else body.decode()).get("scope", [""])[0].split()
                try:
                    answer = response.json()
                except ValueError:
                    answer = {}
                answer = answer if isinstance(answer, dict) else {}
                self.granted = set() if not response.ok else (
                    set(str(answer["scope"]).split()) if "scope" in answer else set(asked))
                self.refusal = "" if response.ok else str(answer.get("error") or response.status_code)
            return response

        def _get_cached_access_token(self, scope_key):
            with self._lock:
                token, until = self._tokens.get(scope_key, ("", 0.0))
            return token if time.monotonic() < until else None

        def _cache_access_token(self, scope_key, access_token, expires_in):
            with self._lock:  # renewed a minute early: a token must not lapse in flight
                self._tokens[scope_key] = (access_token, time.monotonic() + max(0.0, float(expires_in or 0) - 60))

        def make_service_request(self, scopes, url, **kwargs):
            try:
                return super().make_service_request(scopes, url, **kwargs)
            except LtiServiceException as exc:
                if exc.response.status_code != 401:
                    raise
            with self._lock:  # expired or revoked early: a new token, and the request once more
                self._tokens.clear()
            return super().make_service_request(scopes, url, **kwargs)

    return Connector()


def _answer(exc: BaseException) -> tuple[int, str]:
    """The platform's status and its words (one short line) from pylti1p3's exception."""
    response = getattr(exc, "response", None)
    if response is None:
        return 0, " ".join(str(exc).split())[:200]
    try:
        body = response.json()
        words = (body.get("error_description") or body.get("error") or body.get("message") or json.dumps(body)
                 ) if isinstance(body, dict) else json.dumps(body)
    except ValueError:
        words = response.text
    return response.status_code, " ".join(str(words).split())[:200]


def call(conn, fn, what: str, asked: list[str] | tuple[str, ...] = ()):
    """``fn()``, pylti1p3's and requests' errors said in one line; ``asked``: the scopes this call's token
    was asked for, named where the platform did not grant them.

    Raises:
        LtiError: why; ``whole_run`` for a refused token, client or scope (401, 403, the token endpoint's
            refusal) and an unreachable platform; not for one student's or line item's refusal.
    """
    import requests
    from pylti1p3.exception import LtiException, LtiServiceException

    try:
        return fn()
    except LtiError:
        raise
    except LtiServiceException as exc:
        status, words = _answer(exc)
        if "access token" in str(exc) and getattr(conn, "refusal", "") == "invalid_scope":
            raise LtiError(f"the LMS grants none of the scopes asked for {what} ({', '.join(asked) or 'these'}): "
                           "enable them in the tool's registration (docs/lti-admin.md)") from None
        if "access token" in str(exc):
            raise LtiError(f"the LMS refused the tool's access token request ({status}: {words}): check "
                           "tool.toml's client_id and token_url, and that the LMS holds this tool's public key "
                           "(jwks.json; docs/lti-admin.md)") from None
        if status == 403:
            missing = [s for s in asked if s not in conn.granted]
            why = (f"; the LMS did not grant {', '.join(missing)}: enable it in the tool's registration "
                   "(docs/lti-admin.md)") if missing else ""
            raise LtiError(f"the LMS forbids {what} (403: {words}){why}") from None
        if status == 401:
            raise LtiError(f"the LMS refused a new access token for {what} (401: {words})") from None
        if status in (429,) or status >= 500:
            raise LtiError(f"the LMS still answered {status} to {what} after {RETRIES} tries: run the same "
                           "command again later (what was sent is kept)") from None
        error = LtiError(f"the LMS refused {what} ({status}: {words})", whole_run=False)
        error.status = status
        raise error from None
    except LtiException as exc:
        raise LtiError(f"{what}: {exc}") from None
    except requests.RequestException as exc:
        raise LtiError(f"cannot reach the LMS ({what}): {type(exc).__name__}") from None


def check_online(tool: Tool) -> list[str]:
    """A token asked for each scope of :data:`SCOPES` on its own: the lines say which the LMS grants.

    Raises:
        LtiError: the token request itself is refused.
    """

    lines = []
    for scope, why in SCOPES.items():
        conn = connector(tool)
        try:
            call(conn, lambda c=conn, s=scope: c.get_access_token([s]), f"a token (token_url {tool.token_url})",
                 [scope])
        except LtiError:
            # invalid_scope (RFC 6749 5.2): this scope refused; any other refusal is the tool's registration
            if conn.refusal != "invalid_scope":
                raise
        ok = scope in conn.granted
        lines.append(f"  {'granted' if ok else 'REFUSED'}: {scope} ({why})")
    return lines


# The roster (NRPS) ----------------------------------------------------------------------------------------


def members(tool: Tool, conn) -> list[dict]:
    """The course's learners (every page), from the Names and Role Provisioning Services."""
    from pylti1p3.names_roles import NamesRolesProvisioningService

    service = NamesRolesProvisioningService(conn, {"context_memberships_url": tool.memberships_url,
                                                   "service_versions": ["2.0"]})
    people = call(conn, service.get_members, f"the course's members (NRPS, memberships_url {tool.memberships_url})",
                  [SCOPE_MEMBERS])
    return [m for m in people if isinstance(m, dict) and m.get("user_id")
            and any(str(r).endswith("#Learner") or r == "Learner" for r in m.get("roles") or [LEARNER])]


def active(people: list[dict]) -> list[dict]:
    """The learners whose membership is ``Active`` (NRPS 2.0: ``status`` absent means Active); an
    ``Inactive`` or ``Deleted`` one (a dropped student) is matched to no one."""
    return [m for m in people if str(m.get("status") or "Active") == "Active"]


def _course_students(out: Path, submitted: Path | None = None) -> dict[str, dict[str, str]]:
    """The course's students (every id in ``OUT/results.json``) with what collect, ``canvas times`` and grade
    know of them: ``name``, ``email``, ``login_id``, ``sis_user_id`` (``students.csv`` beside ``submitted``,
    then ``OUT/roster.csv``)."""
    rows = json.loads((out / "results.json").read_text()) if (out / "results.json").is_file() else []
    people = {str(r.get("student_id")): {} for r in rows if isinstance(r, dict) and r.get("student_id")}
    beside = [submitted.parent / STUDENTS_CSV] if submitted is not None else []
    for path in (*beside, out / "roster.csv"):
        if path.is_file():
            for row in read_rows(path):
                sid = (row.get("student_id") or "").strip()
                if sid in people:
                    for k in ("name", "email", "login_id", "sis_user_id"):
                        if (row.get(k) or "").strip() and not people[sid].get(k):
                            people[sid][k] = row[k].strip()
    return people


def _login(member: dict) -> str:
    login = member.get("login_id") or member.get("ext_user_username") or ""
    return str(login or str(member.get("email") or "").partition("@")[0]).strip().casefold()


# The order a student is matched in: the first rule that finds exactly one member wins (docs/lti.md).
RULES = (
    ("lms user id", lambda sid, info, m: str(m.get("user_id")) == sid),
    ("sis id", lambda sid, info, m: bool(m.get("lis_person_sourcedid"))
     and str(m["lis_person_sourcedid"]) in (sid, info.get("sis_user_id"))),
    ("login", lambda sid, info, m: bool(_login(m)) and _login(m) in (sid.casefold(),
                                                                      info.get("login_id", "").casefold())),
    ("email", lambda sid, info, m: bool(m.get("email"))
     and str(m["email"]).casefold() in (sid.casefold(), info.get("email", "").casefold())),
)


def by_hand(row: dict[str, str]) -> bool:
    """Whether the instructor set this roster row: ``matched_by`` is "by hand", whatever its case, spaces,
    hyphen or underscore (a row typed by hand is not lost to a spelling)."""
    return " ".join(str(row.get("matched_by") or "").replace("-", " ").replace("_", " ").split()).casefold() \
        == BY_HAND


def match(students: dict[str, dict[str, str]], people: list[dict], kept: dict[str, dict[str, str]]
          ) -> tuple[list[dict[str, str]], list[str]]:
    """Each student id matched to one LMS user: a row the instructor set (``matched_by`` ``by hand``) kept,
    then :data:`RULES` one after the other over every student still unmatched, so that a stronger rule (the
    user id) is used for the whole class before a weaker one (the email). A rule that finds two members for
    a student, or one member for two students, matches none of them (said, for the instructor to settle).
    Returns the roster's rows (every student; ``lms_user_id`` empty where unmatched) and the lines that say
    who is unmatched and why."""
    by_id = {str(m["user_id"]): m for m in people}
    found: dict[str, tuple[dict, str]] = {}
    why: dict[str, str] = {}
    said: list[str] = []
    for sid in sorted(students):
        hand = kept.get(sid)
        if hand and by_hand(hand):
            uid = hand.get("lms_user_id", "")
            found[sid] = (by_id.get(uid, {"user_id": uid}), BY_HAND)
            if uid and uid not in by_id:
                said.append(f"  {sid}: matched by hand to {uid}, who is not a learner of the course in the LMS "
                            "(sent anyway: the LMS will say)")
    taken = {str(m["user_id"]) for m, _ in found.values()}
    for rule, test in RULES:
        hits = {sid: [m for m in people if str(m["user_id"]) not in taken and test(sid, students[sid], m)]
                for sid in sorted(students) if sid not in found and sid not in why}
        claims: dict[str, list[str]] = {}
        for sid, members_found in hits.items():
            if len(members_found) == 1:
                claims.setdefault(str(members_found[0]["user_id"]), []).append(sid)
            elif len(members_found) > 1:
                why[sid] = f"{len(members_found)} members match by {rule}"
        for uid, sids in claims.items():
            if len(sids) == 1:
                found[sids[0]] = (by_id[uid], rule)
                taken.add(uid)
            else:
                for sid in sids:
                    why[sid] = f"LMS user {uid} matches {len(sids)} students by {rule}"
    rows = []
    for sid in sorted(students):
        if sid in found:
            m, by = found[sid]
            rows.append(_row(sid, m, by))
        else:
            rows.append({**_row(sid, {}, ""), "name": students[sid].get("name", "")})
            reason = why.get(sid, "no member's user id, SIS id, login or email is the student's")
            said.append(f"  {sid}: UNMATCHED ({reason}): set lms_user_id and matched_by = {BY_HAND} in the roster")
    return rows, said


def _name(member: dict) -> str:
    """A member's name as it may be shown (NRPS ``name``, else ``given_name family_name``)."""
    return cleaned(str(member.get("name") or " ".join(str(member.get(k) or "") for k in ("given_name", "family_name"))))


def _row(sid: str, member: dict, by: str) -> dict[str, str]:
    return {"student_id": sid, "lms_user_id": str(member.get("user_id") or ""), "name": _name(member),
            "email": str(member.get("email") or ""), "sis_id": str(member.get("lis_person_sourcedid") or ""),
            "matched_by": by}


def _add_names(path: Path, added: dict[str, str]) -> None:
    """``added`` (student id -> name) into ``OUT/roster.csv``, every other column and row kept as it is."""
    rows = read_rows(path) if path.is_file() else []
    header = list(rows[0]) if rows else ["student_id", "name"]
    header += [c for c in ("student_id", "name") if c not in header]
    seen = set()
    for row in rows:
        sid = (row.get("student_id") or "").strip()
        seen.add(sid)
        if sid in added and not (row.get("name") or "").strip():
            row["name"] = added[sid]
    rows += [{"student_id": sid, "name": name} for sid, name in sorted(added.items()) if sid not in seen]
    atomic_write(path, csv_text([header, *[[row.get(c) or "" for c in header] for row in rows]]))


def read_roster(folder: Path) -> dict[str, dict[str, str]]:
    """``DIR/roster.csv`` by student id ({} where there is none yet).

    Raises:
        LtiError: it lacks a column of :data:`ROSTER_HEADER`.
    """
    path = folder / ROSTER
    if not path.is_file():
        return {}
    rows = read_rows(path)
    if rows and not set(ROSTER_HEADER) <= set(rows[0]):
        raise LtiError(f"{path}: expected the columns {','.join(ROSTER_HEADER)}; delete it and run "
                       "`lti roster` again")
    return {r["student_id"].strip(): {k: (v or "").strip() for k, v in r.items() if k} for r in rows}


def roster(tool: Tool, out: Path, say=print, conn=None, submitted: Path | None = None
           ) -> dict[str, dict[str, str]]:
    """``lti roster``: members fetched, matched, ``DIR/roster.csv`` written, and ``DIR/lms-learners.csv``:
    every learner the LMS lists (user id, name, email, SIS id, status, the student matched), where the
    instructor finds the user id to set by hand. Returns the roster by student id.

    Raises:
        LtiError: as :func:`call` and :func:`read_roster`.
    """
    conn = conn or connector(tool)
    everyone = members(tool, conn)
    people = active(everyone)
    students = _course_students(out, submitted)
    rows, said = match(students, people, read_roster(tool.folder))
    atomic_write(tool.folder / ROSTER, csv_text([ROSTER_HEADER, *[[r[k] for k in ROSTER_HEADER] for r in rows]]))
    whose = {r["lms_user_id"]: r["student_id"] for r in rows if r["lms_user_id"]}
    atomic_write(tool.folder / LEARNERS, csv_text([LEARNERS_HEADER, *[
        [str(m["user_id"]), _name(m), str(m.get("email") or ""),
         str(m.get("lis_person_sourcedid") or ""), str(m.get("status") or "Active"), whose.get(str(m["user_id"]), "")]
        for m in everyone]]))
    # The LMS's names where the run knew none: `report` and `similarity` read OUT/roster.csv.
    known = for_run(out=out)
    added = {r["student_id"]: r["name"] for r in rows if r["name"] and not known.get(r["student_id"])}
    if added:
        _add_names(out / KEPT, added)
    matched = sum(bool(r["lms_user_id"]) for r in rows)
    extra = [str(m["user_id"]) for m in people if str(m["user_id"]) not in whose]
    gone = len(everyone) - len(people)
    say(f"{tool.folder / ROSTER}: {matched} of {len(rows)} students matched to the LMS's {len(people)} learners"
        + (f" ({gone} more not active: matched to no one)" if gone else "")
        + (f"; {len(extra)} learner{'s' * (len(extra) != 1)} matched to no student (all in {tool.folder / LEARNERS})"
           if extra else "")
        + (f"; {len(added)} name{'s' * (len(added) != 1)} from the LMS added to {out / KEPT} (for "
           "`report`)" if added else ""))
    if submitted is not None and not (submitted.parent / STUDENTS_CSV).is_file():
        say(f"note: no {submitted.parent / STUDENTS_CSV}: only the student ids (and OUT/roster.csv's columns) "
            "were compared")
    for line in said:
        say(line)
    return {r["student_id"]: r for r in rows}


# Grade passback (AGS) -------------------------------------------------------------------------------------


def score_of(item: push.Outgoing, user_id: str, feedback_url: str = "") -> dict:
    """The score sent for ``item`` (AGS 2.0, "Score publish service"): points out of the notebook's maximum,
    ``Completed``, ``PendingManual`` while formgrader has answers in words to grade (``FullyGraded`` after),
    the comment (with the feedback page's address where ``feedback_url`` is given). No timestamp: it is
    set when sent, and what was sent is compared without it."""
    comment = item.comment
    if feedback_url:
        comment += " Feedback, test by test: " + feedback_url.format(student_id=item.student_id,
                                                                      assignment=item.assignment)
    return {"userId": user_id, "scoreGiven": item.grade, "scoreMaximum": item.max_points,
            "activityProgress": "Completed",
            "gradingProgress": "PendingManual" if item.awaiting else "FullyGraded", "comment": comment}


class Log:
    """``OUT/lti-log.jsonl``: one line per score sent (the assignment, the student, the line item, the score,
    the platform's status and words), written and synced before the next is sent, so an interrupted push
    resumes where it stopped. No token or key is ever in it."""

    def __init__(self, path: Path):
        self.path = path
        self.lock = threading.Lock()

    def sent(self) -> dict[tuple[str, str], dict]:
        """(line item, user id) -> the last score the platform accepted (timestamp aside)."""
        last: dict[tuple[str, str], dict] = {}
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line cut by a crash: its score is sent again, the same
                if isinstance(entry, dict) and 200 <= int(entry.get("status") or 0) < 300:
                    score = {k: v for k, v in (entry.get("score") or {}).items() if k != "timestamp"}
                    last[(str(entry.get("line_item")), str(score.get("userId")))] = score
        return last

    def write(self, entry: dict) -> None:
        text = json.dumps(entry, ensure_ascii=False) + "\n"
        with self.lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())


def line_item(conn, tool: Tool, assignment: str, title: str, maximum: float, create: bool = True):
    """The assignment's line item: the one whose ``resourceId`` is ``assignment``, else one with the label
    ``title`` and this tool's tag, else a new one (label, ``scoreMaximum``, ``resourceId``, tag), made only
    where ``create``. Returns ``(service, LineItem or None, created)``."""
    from pylti1p3.assignments_grades import AssignmentsGradesService
    from pylti1p3.lineitem import LineItem

    ags = AssignmentsGradesService(conn, {"scope": AGS_SCOPES, "lineitems": tool.lineitems_url})
    where = f"the course's line items (AGS, lineitems_url {tool.lineitems_url})"
    found = call(conn, lambda: ags.find_lineitem_by_resource_id(assignment), where, AGS_SCOPES)
    if found is None:
        found = call(conn, lambda: ags.find_lineitem_satisfying(
            lambda li: li.get("label") == title and li.get("tag") == TAG), where, AGS_SCOPES)
    if found is not None or not create:
        return ags, found, False
    new = (LineItem().set_label(title).set_score_maximum(maximum).set_resource_id(assignment).set_tag(TAG))
    return ags, call(conn, lambda: ags.create_lineitem(new), f"a new line item for {assignment}", AGS_SCOPES), True


@dataclass
class Pushed:
    """What ``lti push`` did for one assignment."""

    line_item: str
    to_send: list[tuple[push.Outgoing, dict]]
    already: int
    unmatched: list[push.Outgoing]
    held: list[push.Held]
    refused: list[tuple[push.Outgoing, str]] = field(default_factory=list)


def push_assignment(tool: Tool, out: Path, assignment: str, *, dry_run: bool = False, feedback_url: str = "",
                    workers: int = 4, say=print, conn=None) -> Pushed:
    """``lti push`` for one assignment: the plan printed, then (unless ``dry_run``) sent, each score logged.

    Raises:
        LtiError: the LMS cannot be used for this run (the token, a scope, the line item); one student's
            refusal is listed in ``Pushed.refused`` instead.
        FileNotFoundError, ValueError: ``OUT/results.json`` is not there or not ``grade``'s.
    """
    from concurrent.futures import ThreadPoolExecutor

    conn = conn or connector(tool)
    items, held = push.outgoing(out, assignment, include_awaiting=True)
    mapping = read_roster(tool.folder)
    if not mapping:
        raise LtiError(f"{tool.folder / ROSTER}: not there; match the students first "
                       f"(`transformer-course lti roster {tool.folder} {out} --submitted SUBMITTED`)")
    if not items:  # nothing graded to send: the LMS is not touched (no empty line item made)
        say(f"{assignment}: nothing to send; {len(held)} held back")
        for h in held:
            say(f"  {h.student_id:<14} held back: {h.reason}")
        return Pushed("", [], 0, [], list(held))
    ags, item, created = line_item(conn, tool, assignment, assignment, items[0].max_points, create=not dry_run)
    item_id = item.get_id() if item is not None else ""  # a dry run makes none: every score would be new
    log = Log(out / LOG)
    last = log.sent()
    result = Pushed(item_id, [], 0, [], list(held))
    for it in sorted(items, key=lambda i: i.student_id):
        user = mapping.get(it.student_id, {}).get("lms_user_id", "")
        if not user:
            result.unmatched.append(it)
            continue
        score = score_of(it, user, feedback_url)
        if last.get((item_id, user)) == score:
            result.already += 1
        else:
            result.to_send.append((it, score))
    names = {sid: r.get("name", "") for sid, r in mapping.items()}
    said = (f"line item {item.get_label()!r} ({'created' if created else 'found'}, "
            f"{item.get_score_maximum():g} points)") if item is not None else (
        f"line item {assignment!r} (to be created, {items[0].max_points:g} points)")
    say(f"{assignment}: {said}: {len(result.to_send)} to send, {result.already} already sent, "
        f"{len(result.unmatched)} unmatched, {len(result.held)} held back")
    for it, score in result.to_send:
        before = last.get((item_id, score["userId"]))
        why = "new" if before is None else "changed: " + ", ".join(
            words for key, words in (("scoreGiven", "points"), ("scoreMaximum", "maximum"),
                                     ("gradingProgress", "progress"), ("comment", "comment"),
                                     ("activityProgress", "activity")) if before.get(key) != score[key])
        say(f"  {it.student_id:<14} {names.get(it.student_id, '')[:24]:<24} {score['scoreGiven']:g}/"
            f"{score['scoreMaximum']:g} {score['gradingProgress']:<13} ({why})")
    for it in result.unmatched:
        say(f"  {it.student_id:<14} NOT SENT: not matched to an LMS user (set it in {tool.folder / ROSTER}; the "
            f"LMS's learners are in {tool.folder / LEARNERS})")
    for h in result.held:
        say(f"  {h.student_id:<14} held back: {h.reason}")
    if dry_run:
        say(f"dry run: nothing sent ({len(result.to_send)} would be)")
        return result
    from pylti1p3.grade import Grade

    def one(pair):
        it, score = pair
        stamp = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
        grade = (Grade().set_user_id(score["userId"]).set_score_given(score["scoreGiven"])
                 .set_score_maximum(score["scoreMaximum"]).set_activity_progress(score["activityProgress"])
                 .set_grading_progress(score["gradingProgress"]).set_comment(score["comment"]).set_timestamp(stamp))
        what = f"the score of student {it.student_id} (LMS user {score['userId']}) in line item {item_id}"
        try:
            call(conn, lambda: ags.put_grade(grade, item), what, AGS_SCOPES)
            status, words = 200, "accepted"
        except LtiError as exc:
            if exc.whole_run:
                raise
            status, words = getattr(exc, "status", 0), str(exc)
        log.write({"at": stamp, "assignment": assignment, "student_id": it.student_id, "line_item": item_id,
                   "score": {**score, "timestamp": stamp}, "status": status, "answer": words})
        return None if status == 200 else (it, words)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(one, pair) for pair in result.to_send]
        try:
            for future in futures:
                if (refused := future.result()) is not None:
                    result.refused.append(refused)
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    say(f"sent to the LMS: {len(result.to_send) - len(result.refused)}; refused: {len(result.refused)}")
    for it, words in result.refused:
        say(f"  REFUSED {it.student_id}: {words}")
    return result


# The command ----------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="lti_command", required=True)
    p = sub.add_parser("init", help="make the tool: its key pair, tool.toml to fill in, and the documents an LMS "
                                    "registers it with (Canvas's JSON, Moodle's fields)")
    p.add_argument("folder", metavar="DIR", help="the tool's folder (made; keep it private)")
    for _section, fields in FIELDS.items():
        for name, what in fields.items():
            p.add_argument(f"--{name.replace('_', '-')}", default="", metavar="VALUE", help=what)
    p.add_argument("--audience", default="", help="the token request's audience, if not the token URL")
    p.add_argument("--launch-url", default="", help="the address the LMS shows for the tool (it is never "
                                                    "launched: grades flow from it only)")
    p = sub.add_parser("check", help="read DIR/tool.toml and the key, say what is wrong; --online: ask the LMS "
                                     "for a token with each scope")
    p.add_argument("folder", metavar="DIR")
    p.add_argument("--online", action="store_true")
    p = sub.add_parser("roster", help="the course's members from the LMS (NRPS), matched to the course's student "
                                      "ids, into DIR/roster.csv")
    p.add_argument("folder", metavar="DIR")
    p.add_argument("out", metavar="OUT", help="the --out folder of `transformer-course grade`")
    p.add_argument("--submitted", default=None, metavar="SUBMITTED",
                   help="the folder of hand-ins `grade` read: the students.csv beside it (collect's, `canvas times`') "
                        "gives each student's SIS id, login and email to match by")
    p = sub.add_parser("push", help="scores, progress and comments from a graded OUT to the LMS (AGS), only what "
                                    "was not sent before")
    p.add_argument("folder", metavar="DIR")
    p.add_argument("out", metavar="OUT", help="the --out folder of `transformer-course grade`")
    p.add_argument("--assignment", action="append", required=True, metavar="NAME",
                   help="the course's assignment (01_self_attention, or 01); repeat it for several")
    p.add_argument("--dry-run", action="store_true", help="print what would be sent; send nothing")
    p.add_argument("--feedback-url", default="", metavar="TEMPLATE",
                   help="the address of a student's feedback page, with {student_id} and {assignment}, put in "
                        "the comment (e.g. https://course.example.edu/feedback/{student_id}/{assignment}.html)")
    p.add_argument("--parallel", type=int, default=4, metavar="N", help="scores sent at once (default 4)")


def run(args: argparse.Namespace) -> int:
    """``transformer-course lti init|check|roster|push``: 0 when done; 1 with one line when the LMS or the
    tool's folder could not be used, or a student's score was refused."""
    from transformer_course.instructors.collect import CollectError

    folder = Path(args.folder).expanduser().resolve()
    try:
        if args.lti_command == "init":
            values = {n: getattr(args, n) for fields in FIELDS.values() for n in fields}
            values["audience"] = args.audience
            for name, value in values.items():
                if value and name.endswith("_url"):
                    _url(value, f"--{name.replace('_', '-')}")
            for path in init(folder, values, launch_url=args.launch_url):
                print(f"wrote {path}")
            print(f"next: register the tool in the LMS (docs/lti-admin.md), fill {folder / CONFIG}, then "
                  f"`transformer-course lti check {folder} --online`")
            return 0
        tool = load(folder)
        if args.lti_command == "check":
            print(f"{folder / CONFIG}: every field is there; the key is private (mode 0600)")
            if args.online:
                lines = check_online(tool)
                print("\n".join(lines))
                return 1 if any("REFUSED" in line for line in lines) else 0
            return 0
        out = Path(args.out).expanduser().resolve()
        if not (out / "results.json").is_file():
            raise LtiError(f"{out}/results.json: not there; grade first (`transformer-course grade ... --out "
                           f"{out}`)")
        conn = connector(tool)
        if args.lti_command == "roster":
            roster(tool, out, conn=conn,
                   submitted=Path(args.submitted).expanduser().resolve() if args.submitted else None)
            return 0
        from transformer_course.instructors.collect import resolve_assignment
        from transformer_course.layout import Repo

        known = [a.name for a in Repo().assignments()]
        try:  # a template with another placeholder than these two would fail on the first student
            args.feedback_url.format(student_id="s", assignment="a")
        except (KeyError, IndexError, ValueError):
            raise LtiError(f"--feedback-url {args.feedback_url!r}: the only placeholders are {{student_id}} and "
                           "{assignment}") from None
        code = 0
        for name in args.assignment:
            result = push_assignment(tool, out, resolve_assignment(name, known), dry_run=args.dry_run,
                                     feedback_url=args.feedback_url, workers=args.parallel, conn=conn)
            code = code or (1 if result.refused else 0)
        return code
    except (LtiError, CollectError, FileNotFoundError, ValueError) as exc:
        print(f"transformer-course lti {args.lti_command}: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `... | head`: the reader left; nothing more to say
        return 1
    except OSError as exc:  # a full disk or a folder not writable: the log or the roster could not be kept
        where = f"cannot write {exc.filename}" if exc.filename else "a file or the network failed"
        print(f"transformer-course lti {args.lti_command}: error: {where} ({exc.strerror or exc})",
              file=sys.stderr)
        return 1
