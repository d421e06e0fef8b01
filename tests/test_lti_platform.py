"""The local LTI 1.3 Advantage platform of the tests (tests/lti_platform.py) is faithful: it really verifies the
tool's signed assertion, really signs its tokens, checks the one scope each call needs, and stores and answers what
AGS 2.0 and NRPS 2.0 say. Driven through the tool's own library (pylti1p3next: ServiceConnector,
AssignmentsGradesService, NamesRolesProvisioningService) and, for the refusals, raw requests with PyJWT."""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
import requests
from pylti1p3.assignments_grades import AssignmentsGradesService
from pylti1p3.exception import LtiServiceException
from pylti1p3.grade import Grade
from pylti1p3.lineitem import LineItem
from pylti1p3.names_roles import NamesRolesProvisioningService
from pylti1p3.registration import Registration
from pylti1p3.service_connector import ServiceConnector

from tests.lti_platform import (
    ASSERTION_TYPE,
    LEARNER,
    LINEITEM,
    LINEITEM_READONLY,
    MEMBERSHIPS,
    RESULT_READONLY,
    SCORE,
    SCORE_TYPE,
    LocalPlatform,
    tool_key,
)

AGS_SCOPES = [LINEITEM, LINEITEM_READONLY, RESULT_READONLY, SCORE]
STUDENTS = [{"user_id": f"lti-{n}", "roles": [LEARNER], "name": f"Student {n}", "given_name": "Student",
             "family_name": str(n), "email": f"s{n}@example.edu", "lis_person_sourcedid": f"sis-{n}"}
            for n in range(3)]


class CachingConnector(ServiceConnector):
    """pylti1p3's ServiceConnector with its token cache in a dict (the library leaves the cache to the tool)."""

    def __init__(self, registration: Registration):
        super().__init__(registration)
        self.cache: dict[str, tuple[str, float]] = {}

    def _get_cached_access_token(self, scope_key: str) -> str | None:
        token, until = self.cache.get(scope_key, ("", 0.0))
        return token if until > time.time() else None

    def _cache_access_token(self, scope_key: str, access_token: str, expires_in: float) -> None:
        self.cache[scope_key] = (access_token, time.time() + expires_in)


@pytest.fixture(scope="module")
def key() -> tuple[str, dict]:
    return tool_key()


@pytest.fixture
def platform(key):
    with LocalPlatform(key[1], members=STUDENTS, page_size=2) as running:
        yield running


def connector(platform: LocalPlatform, private_pem: str, kid: str) -> CachingConnector:
    registration = (Registration().set_issuer(platform.issuer).set_client_id(platform.client_id)
                    .set_auth_token_url(platform.token_url).set_tool_private_key(private_pem))
    registration.get_kid = lambda: kid  # the kid of the JWKS the platform holds
    return CachingConnector(registration)


@pytest.fixture
def tool(platform, key) -> CachingConnector:
    return connector(platform, key[0], key[1]["keys"][0]["kid"])


def ags(tool: CachingConnector, platform: LocalPlatform, scopes=AGS_SCOPES) -> AssignmentsGradesService:
    return AssignmentsGradesService(tool, {"scope": list(scopes), "lineitems": platform.lineitems_url})


def assertion(platform: LocalPlatform, key, **changes) -> str:
    """A client assertion (Security Framework 1.0 section 4.1.1), with ``changes`` to its claims."""
    now = int(time.time())
    claims = {"iss": platform.client_id, "sub": platform.client_id, "aud": platform.token_url, "iat": now - 5,
              "exp": now + 60, "jti": str(uuid.uuid4()), **changes}
    return jwt.encode(claims, key[0], algorithm="RS256", headers={"kid": key[1]["keys"][0]["kid"]})


def token_request(platform: LocalPlatform, client_assertion: str, scope: str = SCORE, **form) -> requests.Response:
    data = {"grant_type": "client_credentials", "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": client_assertion, "scope": scope, **form}
    return requests.post(platform.token_url, data=data, timeout=10)


def grade(user_id: str, given: float, when: datetime, progress: str = "FullyGraded") -> Grade:
    return (Grade().set_user_id(user_id).set_score_given(given).set_score_maximum(10)
            .set_activity_progress("Completed").set_grading_progress(progress).set_comment(f"{given} of 10")
            .set_timestamp(when.isoformat(timespec="milliseconds")))  # AGS 3.4.9: sub-second precision


# The token endpoint -------------------------------------------------------------------------------------------

def test_a_correctly_signed_assertion_gets_a_token_the_platform_signed(platform, tool):
    token = tool.get_access_token([SCORE, LINEITEM])
    keys = jwt.PyJWKSet.from_dict(requests.get(platform.jwks_url, timeout=10).json())
    header = jwt.get_unverified_header(token)
    claims = jwt.decode(token, keys[header["kid"]].key, algorithms=["RS256"])  # raises unless signed by it
    assert claims["iss"] == platform.issuer and claims["sub"] == platform.client_id
    assert set(claims["scope"].split()) == {SCORE, LINEITEM}
    assert 3590 < claims["exp"] - time.time() <= 3601
    assert platform.tokens_issued == 1
    assert tool.get_access_token([SCORE, LINEITEM]) == token  # cached by the tool: no second grant
    assert platform.requests == [("POST", "/token", 200), ("GET", "/jwks", 200)]


def test_the_token_answer_has_the_fields_rfc_6749_names(platform, key):
    answer = token_request(platform, assertion(platform, key), scope=f"{SCORE} {MEMBERSHIPS}")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3600
    assert body["scope"].split() == [SCORE, MEMBERSHIPS]
    assert answer.headers["Cache-Control"] == "no-store"


@pytest.mark.parametrize("case", ["other key", "expired", "wrong aud", "wrong iss", "no jti", "reused jti"])
def test_a_bad_assertion_is_refused_invalid_client(platform, key, case):
    if case == "other key":
        other = tool_key()
        signed = jwt.decode(assertion(platform, key), options={"verify_signature": False})
        bad = jwt.encode(signed, other[0], algorithm="RS256", headers={"kid": key[1]["keys"][0]["kid"]})
    elif case == "expired":
        bad = assertion(platform, key, exp=int(time.time()) - 60, iat=int(time.time()) - 120)
    elif case == "wrong aud":
        bad = assertion(platform, key, aud=platform.issuer + "/elsewhere")
    elif case == "wrong iss":
        bad = assertion(platform, key, iss="another-tool", sub="another-tool")
    elif case == "no jti":
        bad = jwt.encode({k: v for k, v in jwt.decode(assertion(platform, key), options={"verify_signature": False})
                          .items() if k != "jti"}, key[0], algorithm="RS256", headers={"kid": key[1]["keys"][0]["kid"]})
    else:
        bad = assertion(platform, key)
        assert token_request(platform, bad).status_code == 200  # first use
    answer = token_request(platform, bad)
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"] == "invalid_client"
    assert "access_token" not in answer.json()
    assert platform.tokens_issued == (1 if case == "reused jti" else 0)


def test_a_configured_audience_is_accepted_besides_the_token_url(key):
    with LocalPlatform(key[1], audience="https://lms.example.edu/login/oauth2/token") as platform:
        assert token_request(platform, assertion(platform, key, aud=platform.audience)).status_code == 200
        assert token_request(platform, assertion(platform, key)).status_code == 200
        assert token_request(platform, assertion(platform, key, aud="https://else.example")).status_code == 401


def test_a_wrong_grant_is_refused(platform, key):
    answer = token_request(platform, assertion(platform, key), grant_type="password")
    assert (answer.status_code, answer.json()["error"]) == (400, "unsupported_grant_type")
    answer = token_request(platform, assertion(platform, key), client_assertion_type="urn:other")
    assert (answer.status_code, answer.json()["error"]) == (400, "invalid_request")
    answer = token_request(platform, assertion(platform, key), scope="https://example.edu/scope/everything")
    assert (answer.status_code, answer.json()["error"]) == (400, "invalid_scope")
    assert platform.tokens_issued == 0


def test_the_tool_key_set_may_come_from_a_url(key):
    class Serve(BaseHTTPRequestHandler):
        def do_GET(self):
            data = json.dumps(key[1]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Serve)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with LocalPlatform(f"http://127.0.0.1:{server.server_address[1]}/jwks.json") as platform:
            assert token_request(platform, assertion(platform, key)).status_code == 200
            assert token_request(platform, assertion(platform, tool_key())).status_code == 401
    finally:
        server.shutdown()
        server.server_close()


# Tokens on the service calls ------------------------------------------------------------------------------------

def test_a_token_without_the_score_scope_gets_403_on_a_score_post(platform, tool):
    item = ags(tool, platform).create_lineitem(LineItem().set_label("A1").set_score_maximum(10).set_tag("a1"))
    readonly = ags(tool, platform, [LINEITEM, RESULT_READONLY])  # lineitem and result, but no score
    token = tool.get_access_token([LINEITEM, RESULT_READONLY])
    answer = requests.post(f"{item.get_id()}/scores", data=grade("lti-0", 5, datetime.now(UTC)).get_value(),
                           headers={"Authorization": f"Bearer {token}", "Content-Type": SCORE_TYPE}, timeout=10)
    assert answer.status_code == 403, answer.text
    assert 'error="insufficient_scope"' in answer.headers["WWW-Authenticate"]
    assert SCORE in answer.headers["WWW-Authenticate"]
    assert platform.scores(item.get_id(), "lti-0") == []
    assert list(readonly.get_grades(item)) == []  # the token's own scopes still work


def test_a_refused_scope_is_never_granted(platform, tool):
    platform.refuse_scope(SCORE)
    service = ags(tool, platform)
    item = service.find_or_create_lineitem(LineItem().set_label("A1").set_score_maximum(10).set_tag("a1"))
    with pytest.raises(LtiServiceException) as refused:
        service.put_grade(grade("lti-0", 5, datetime.now(UTC)), item)
    assert refused.value.response.status_code == 403
    claims = jwt.decode(tool.get_access_token(AGS_SCOPES), options={"verify_signature": False})
    assert SCORE not in claims["scope"].split() and LINEITEM in claims["scope"].split()


def test_an_expired_token_gets_401_and_a_new_one_works(platform, tool):
    service = ags(tool, platform)
    item = service.create_lineitem(LineItem().set_label("A1").set_score_maximum(10))
    platform.expire_tokens()
    with pytest.raises(LtiServiceException) as refused:
        service.put_grade(grade("lti-0", 5, datetime.now(UTC)), item)
    assert refused.value.response.status_code == 401
    assert 'error="invalid_token"' in refused.value.response.headers["WWW-Authenticate"]
    tool.cache.clear()  # what the tool must do on a 401: a new grant
    service.put_grade(grade("lti-0", 5, datetime.now(UTC)), item)
    assert platform.tokens_issued == 2 and len(platform.scores(item.get_id(), "lti-0")) == 1


def test_a_token_outlives_neither_its_lifetime_nor_a_forgery(key):
    with LocalPlatform(key[1], members=STUDENTS, token_lifetime_s=0.3) as platform:
        answer = token_request(platform, assertion(platform, key), scope=MEMBERSHIPS).json()
        assert answer["expires_in"] == 0.3
        headers = {"Authorization": f"Bearer {answer['access_token']}"}
        assert requests.get(platform.memberships_url, headers=headers, timeout=10).status_code == 200
        time.sleep(0.4)
        assert requests.get(platform.memberships_url, headers=headers, timeout=10).status_code == 401
        forged = jwt.encode({"iss": platform.issuer, "sub": platform.client_id, "scope": MEMBERSHIPS,
                             "exp": int(time.time()) + 600}, key[0], algorithm="RS256")
        for authorization in ("", "Bearer", f"Bearer {forged}", f"Basic {answer['access_token']}"):
            answer_ = requests.get(platform.memberships_url, headers={"Authorization": authorization}, timeout=10)
            assert answer_.status_code == 401, authorization[:6]


# AGS 2.0 --------------------------------------------------------------------------------------------------------

def test_line_items_are_created_and_found_by_resource_id_and_tag(platform, tool):
    service = ags(tool, platform)
    first = service.find_or_create_lineitem(
        LineItem().set_label("Attention").set_score_maximum(20).set_resource_id("attention").set_tag("hw1"),
        find_by="resource_id")
    second = service.find_or_create_lineitem(LineItem().set_label("Decoder").set_score_maximum(30).set_tag("hw2"))
    again = service.find_or_create_lineitem(LineItem().set_label("Attention").set_score_maximum(20)
                                            .set_resource_id("attention"), find_by="resource_id")
    assert again.get_id() == first.get_id() != second.get_id()
    assert len(platform.line_items) == 2
    assert platform.line_items[first.get_id()] == {"id": first.get_id(), "label": "Attention", "scoreMaximum": 20,
                                                   "resourceId": "attention", "tag": "hw1"}
    assert platform.line_item(resource_id="attention")["id"] == first.get_id()
    assert platform.line_item(tag="hw2")["id"] == second.get_id()
    assert platform.line_item(resource_id="attention", tag="hw2") is None
    # The container's own filters (AGS 3.2.4), answered with the container media type
    token = tool.get_access_token([LINEITEM_READONLY])
    answer = requests.get(platform.lineitems_url, params={"tag": "hw2"},
                          headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert answer.headers["Content-Type"] == "application/vnd.ims.lis.v2.lineitemcontainer+json"
    assert [item["id"] for item in answer.json()] == [second.get_id()]
    answer = requests.get(platform.lineitems_url, params={"resource_id": "attention"},
                          headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert [item["id"] for item in answer.json()] == [first.get_id()]


def test_line_items_page_by_limit_with_a_link_header(platform, tool):
    service = ags(tool, platform)
    ids = [service.create_lineitem(LineItem().set_label(f"A{n}").set_score_maximum(10)).get_id() for n in range(3)]
    token = tool.get_access_token(AGS_SCOPES)
    first = requests.get(platform.lineitems_url, params={"limit": 2}, headers={"Authorization": f"Bearer {token}"},
                         timeout=10)
    assert [item["id"] for item in first.json()] == ids[:2]
    second = requests.get(first.links["next"]["url"], headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert [item["id"] for item in second.json()] == ids[2:]
    assert "next" not in second.links
    assert [item["id"] for item in service.get_lineitems()] == ids  # no limit: one page


def test_a_line_item_is_read_replaced_and_deleted_and_bound_only_to_a_resource_link_of_the_course(key):
    with LocalPlatform(key[1], resource_link_ids=["link-7"]) as platform:
        token = connector(platform, key[0], key[1]["keys"][0]["kid"]).get_access_token([LINEITEM])
        auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/vnd.ims.lis.v2.lineitem+json"}

        def call(method: str, url: str, body: dict | None = None) -> requests.Response:
            return requests.request(method, url, data=None if body is None else json.dumps(body), headers=auth,
                                    timeout=10)

        unknown = call("POST", platform.lineitems_url, {"label": "A", "scoreMaximum": 5, "resourceLinkId": "x"})
        assert unknown.status_code == 404  # AGS 3.2.9
        item = call("POST", platform.lineitems_url, {"label": "A", "scoreMaximum": 5, "resourceLinkId": "link-7"})
        assert item.status_code == 201 and item.headers["Location"] == item.json()["id"]
        url = item.json()["id"]
        found = call("GET", platform.lineitems_url + "?resource_link_id=link-7").json()
        assert [i["id"] for i in found] == [url]
        assert call("GET", platform.lineitems_url + "?resource_link_id=link-8").json() == []  # AGS 3.2.4
        replaced = call("PUT", url, {"label": "A, revised", "scoreMaximum": 6})
        assert replaced.json() == {"id": url, "label": "A, revised", "scoreMaximum": 6, "resourceLinkId": "link-7"}
        assert call("PUT", url, {"label": "B", "scoreMaximum": 6, "resourceLinkId": "link-9"}).status_code == 400
        assert call("GET", url).json()["label"] == "A, revised"
        assert call("DELETE", url).status_code == 204
        assert call("GET", url).status_code == 404 and platform.line_items == {}


@pytest.mark.parametrize("body", [{"scoreMaximum": 10}, {"label": "A1"}, {"label": "A1", "scoreMaximum": 0},
                                  {"label": "", "scoreMaximum": 5}])
def test_a_line_item_without_label_or_maximum_is_400(platform, tool, body):
    token = tool.get_access_token([LINEITEM])
    answer = requests.post(platform.lineitems_url, data=json.dumps(body), timeout=10, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/vnd.ims.lis.v2.lineitem+json"})
    assert answer.status_code == 400, answer.text
    assert platform.line_items == {}


def test_scores_are_stored_and_the_results_service_gives_the_latest(platform, tool):
    service = ags(tool, platform)
    item = service.create_lineitem(LineItem().set_label("A1").set_score_maximum(20))
    start = datetime.now(UTC)
    service.put_grade(grade("lti-0", 4, start, "PendingManual"), item)
    service.put_grade(grade("lti-0", 9, start + timedelta(seconds=1)), item)
    service.put_grade(grade("lti-1", 7, start), item)
    stored = platform.scores(item.get_id(), "lti-0")
    assert [(s["scoreGiven"], s["gradingProgress"]) for s in stored] == [(4, "PendingManual"), (9, "FullyGraded")]
    assert platform.result(item.get_id(), "lti-0")["comment"] == "9 of 10"
    results = {r["userId"]: r for r in service.get_grades(item)}
    assert results["lti-0"]["resultScore"] == 18 and results["lti-0"]["resultMaximum"] == 20  # scaled, AGS 3.3
    assert results["lti-1"]["resultScore"] == 14 and results["lti-0"]["scoreOf"] == item.get_id()
    token = tool.get_access_token([RESULT_READONLY])
    one = requests.get(f"{item.get_id()}/results", params={"user_id": "lti-1"}, timeout=10,
                       headers={"Authorization": f"Bearer {token}"})
    assert one.headers["Content-Type"] == "application/vnd.ims.lis.v2.resultcontainer+json"
    assert [r["userId"] for r in one.json()] == ["lti-1"]


def test_scores_from_several_threads_are_all_stored(platform, tool, key):
    service = ags(tool, platform)
    items = [service.create_lineitem(LineItem().set_label(f"A{n}").set_score_maximum(10)) for n in range(4)]
    now = datetime.now(UTC)

    def push(item: LineItem) -> None:
        mine = ags(connector(platform, key[0], key[1]["keys"][0]["kid"]), platform)  # its own session
        for n, student in enumerate(STUDENTS):
            mine.put_grade(grade(student["user_id"], n, now), item)

    threads = [threading.Thread(target=push, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {(i.get_id(), s["user_id"]): len(platform.scores(i.get_id(), s["user_id"])) for i in items
            for s in STUDENTS} == {(i.get_id(), s["user_id"]): 1 for i in items for s in STUDENTS}
    assert platform.tokens_issued == 1 + len(items)  # each thread's connector made its own grant


def test_a_stale_or_repeated_timestamp_is_refused_and_changes_nothing(platform, tool):
    service = ags(tool, platform)
    item = service.create_lineitem(LineItem().set_label("A1").set_score_maximum(10))
    now = datetime.now(UTC)
    service.put_grade(grade("lti-0", 8, now), item)
    for when in (now - timedelta(milliseconds=1), now):  # earlier: AGS 3.4.9; the same: a tool MUST NOT
        with pytest.raises(LtiServiceException) as refused:
            service.put_grade(grade("lti-0", 2, when), item)
        assert refused.value.response.status_code == 409
    assert [s["scoreGiven"] for s in platform.scores(item.get_id(), "lti-0")] == [8]


def test_a_malformed_score_is_400(platform, tool):
    service = ags(tool, platform)
    item = service.create_lineitem(LineItem().set_label("A1").set_score_maximum(10))
    # pylti1p3 formats a datetime to the second, without the sub-second precision AGS 3.4.9 requires
    whole_seconds = grade("lti-0", 5, datetime.now(UTC)).set_timestamp(datetime.now(UTC))
    no_progress = grade("lti-0", 5, datetime.now(UTC)).set_grading_progress("Done")
    for bad in (whole_seconds, no_progress):
        with pytest.raises(LtiServiceException) as refused:
            service.put_grade(bad, item)
        assert refused.value.response.status_code == 400
    assert platform.scores(item.get_id(), "lti-0") == []


def test_a_score_for_someone_not_a_student_of_the_course_is_422_as_canvas_answers(platform, tool):
    platform.add_member({"user_id": "teacher", "roles": ["http://purl.imsglobal.org/vocab/lis/v2/membership#"
                                                         "Instructor"]})
    service = ags(tool, platform)
    item = service.create_lineitem(LineItem().set_label("A1").set_score_maximum(10))
    for user in ("stranger", "teacher"):
        with pytest.raises(LtiServiceException) as refused:
            service.put_grade(grade(user, 5, datetime.now(UTC)), item)
        assert refused.value.response.status_code == 422
        assert refused.value.response.json()["errors"]["message"] == "User not found in course or is not a student"
        assert platform.scores(item.get_id(), user) == []


# NRPS 2.0 -------------------------------------------------------------------------------------------------------

def test_memberships_page_across_two_pages(platform, tool):
    nrps = NamesRolesProvisioningService(tool, {"context_memberships_url": platform.memberships_url})
    members = nrps.get_members()
    assert [m["user_id"] for m in members] == ["lti-0", "lti-1", "lti-2"]
    assert members[2] == {**STUDENTS[2], "status": "Active"}
    pages = [r for r in platform.requests if r[1] == "/memberships"]
    assert pages == [("GET", "/memberships", 200)] * 2  # page_size 2: two pages
    body = nrps.get_nrps_data()
    assert body["headers"]["Content-Type"] == "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
    assert body["body"]["id"] == platform.memberships_url and body["body"]["context"]["id"]
    assert body["next_page_url"] and "page=2" in body["next_page_url"]


# Faults ---------------------------------------------------------------------------------------------------------

def test_fail_next_answers_429_with_retry_after_then_serves(platform, tool):
    nrps = NamesRolesProvisioningService(tool, {"context_memberships_url": platform.memberships_url})
    platform.fail_next(429, times=2, retry_after=1.5, path_contains="/memberships")
    for _ in range(2):
        with pytest.raises(LtiServiceException) as refused:
            nrps.get_members_page()
        assert refused.value.response.status_code == 429
        assert refused.value.response.headers["Retry-After"] == "2"
    assert len(nrps.get_members_page()[0]) == 2
    assert [status for _, path, status in platform.requests if path == "/memberships"] == [429, 429, 200]
    assert ("POST", "/token", 200) in platform.requests  # the token endpoint's path was not matched


# Speed (make bench) ---------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_2400_score_posts_through_one_keep_alive_session_take_well_under_30_s(key):
    students = [{"user_id": f"lti-{n}", "roles": [LEARNER]} for n in range(300)]
    with LocalPlatform(key[1], members=students) as platform:
        tool = connector(platform, key[0], key[1]["keys"][0]["kid"])
        service = ags(tool, platform)
        items = [service.create_lineitem(LineItem().set_label(f"A{n}").set_score_maximum(10)) for n in range(8)]
        now = datetime.now(UTC)
        start = time.perf_counter()
        for item in items:
            for student in students:
                service.put_grade(grade(student["user_id"], 7, now), item)
        took = time.perf_counter() - start
        print(f"2400 score POSTs: {took:.1f} s")
        assert sum(len(platform.scores(i.get_id(), s["user_id"])) for i in items for s in students) == 2400
        assert platform.connections == 1  # one keep-alive connection for the token, line items and scores
        assert took < 15, f"2400 score POSTs took {took:.1f} s"
