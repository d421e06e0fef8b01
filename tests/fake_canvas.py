"""A Canvas LMS on 127.0.0.1 for the tests and the bench: the REST endpoints ``transformer-course canvas``
reaches through canvasapi, answering the JSON that Canvas's API documentation gives.

The shapes, and the pages they come from (Canvas LMS REST API, developerdocs.instructure.com/services/canvas):

- Course (resources/courses, "A Course object"): ``GET /api/v1/courses/:id``.
- Assignment (resources/assignments, "An Assignment object"): ``GET /api/v1/courses/:id/assignments``
  (``search_term`` matches part of the name, case-insensitively) and ``.../assignments/:id``.
- Submission and SubmissionComment (resources/submissions, "A Submission object", "A SubmissionComment
  object"): ``GET .../assignments/:id/submissions`` with ``include[]=user`` and
  ``include[]=submission_comments``; one per student in the course, ``workflow_state`` ``unsubmitted`` and
  ``submitted_at`` null until handed in, as Canvas lists them. ``PUT .../submissions/:user_id`` ("Grade or
  comment on a submission"): ``submission[posted_grade]``, ``comment[text_comment]``,
  ``comment[file_ids][]``; a user not in the course is ``404``.
- User (resources/users, "A User object") and Enrollment (resources/enrollments): ``GET
  /api/v1/courses/:id/users`` and ``/search_users`` with ``enrollment_type[]=student``, ``GET
  /api/v1/courses/:id/enrollments``; ``login_id`` and ``sis_user_id`` as a teacher's token sees them.
- The comment file upload (resources/submission_comments, "Upload a file"; basics/file_uploads): step 1
  ``POST .../submissions/:user_id/comments/files`` (``name``, ``size``) answers ``upload_url`` and
  ``upload_params``; step 2 a multipart ``POST`` to ``upload_url``, without the token, answers a redirect;
  step 3 following it (``GET /api/v1/files/:id/create_success?uuid=...``) gives the File object (resources/files).
- Pagination (basics/pagination): ``per_page`` (default 10, at most 100) and ``page``; a ``Link`` header
  with ``current``, ``next``, ``first`` and ``last`` (absolute URLs, the query kept).
- Authentication (basics/oauth2, "Using an access token"): ``Authorization: Bearer <token>``; a wrong one is
  ``401`` ``{"errors": [{"message": "Invalid access token."}]}`` with ``WWW-Authenticate``.
- Throttling (basics/throttling): a leaky bucket per token; every API answer has ``X-Request-Cost`` and
  ``X-Rate-Limit-Remaining``; a request that finds the bucket full is ``403`` with the body
  ``403 Forbidden (Rate Limit Exceeded)`` and costs nothing.
"""

from __future__ import annotations

import email
import email.policy
import itertools
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlencode, urlsplit

THROTTLED_BODY = "403 Forbidden (Rate Limit Exceeded)"  # Canvas's throttled answer (basics/throttling)


@dataclass
class Bucket:
    """Canvas's leaky bucket (basics/throttling; canvas-lms lib/canvas/request_throttle.rb): each request adds
    its cost, the bucket drains at ``leak`` per second, a request that finds it above ``capacity`` is refused."""

    capacity: float = 700.0
    leak: float = 10.0
    cost: float = 0.05
    up_front: float = 50.0  # the pre-flight penalty of each other request in flight (credited back after)
    level: float = 0.0
    when: float = field(default_factory=time.monotonic)

    def take(self, in_flight: int = 1) -> tuple[bool, float]:
        """Whether the request may run, with ``in_flight`` requests (itself included) being answered, and the
        quota left after it."""
        now = time.monotonic()
        self.level = max(0.0, self.level - (now - self.when) * self.leak)
        self.when = now
        if self.level + self.cost + self.up_front * (in_flight - 1) > self.capacity:
            return False, self.capacity - self.level
        self.level += self.cost
        return True, self.capacity - self.level


class FakeCanvas:
    """One course's Canvas: students, assignments, submissions and what was sent to them.

    ``requests`` logs ``(method, path)`` of every request; ``throttled`` counts the 403s it answered.
    """

    def __init__(self, token: str = "fake-token", course_id: int = 4711, bucket: Bucket | None = None):
        self.token = token
        self.course = {"id": course_id, "name": "Building the Transformer", "course_code": "TRANSFORMER",
                       "workflow_state": "available", "account_id": 1, "time_zone": "Europe/Berlin"}
        self.bucket = bucket or Bucket()
        self.users: dict[int, dict] = {}
        self.assignments: dict[int, dict] = {}
        self.submissions: dict[tuple[int, int], dict] = {}
        self.files: dict[int, dict] = {}
        self.pending: dict[str, dict] = {}  # upload uuid -> the file announced in step 1
        self.requests: list[tuple[str, str]] = []
        self.throttled = 0
        self.in_flight = 0
        self.lock = threading.Lock()
        self._ids = itertools.count(9001)
        self.server: ThreadingHTTPServer | None = None

    # The course's contents -------------------------------------------------------------------------

    def add_student(self, user_id: int, name: str, login_id: str = "", sis_user_id: str | None = None) -> dict:
        last, _, first = name.rpartition(" ")
        user = {"id": user_id, "name": name, "sortable_name": f"{first}, {last}" if last else name,
                "short_name": name, "first_name": last and name.split(" ")[0], "last_name": first,
                "sis_user_id": sis_user_id, "integration_id": None, "login_id": login_id or f"u{user_id}",
                "avatar_url": None, "email": f"{login_id or user_id}@example.edu"}
        self.users[user_id] = user
        for assignment_id in self.assignments:
            self._blank(assignment_id, user_id)
        return user

    def add_assignment(self, name: str, points_possible: float) -> int:
        assignment_id = next(self._ids)
        self.assignments[assignment_id] = {
            "id": assignment_id, "name": name, "description": "", "course_id": self.course["id"],
            "points_possible": points_possible, "grading_type": "points", "due_at": "2026-11-24T22:59:00Z",
            "submission_types": ["online_upload"], "published": True, "workflow_state": "published",
            "html_url": f"/courses/{self.course['id']}/assignments/{assignment_id}"}
        for user_id in self.users:
            self._blank(assignment_id, user_id)
        return assignment_id

    def _blank(self, assignment_id: int, user_id: int) -> None:
        self.submissions[assignment_id, user_id] = {
            "id": next(self._ids), "assignment_id": assignment_id, "user_id": user_id, "attempt": None,
            "body": None, "grade": None, "score": None, "entered_grade": None, "entered_score": None,
            "grade_matches_current_submission": True, "submitted_at": None, "graded_at": None, "grader_id": None,
            "late": False, "excused": False, "missing": False, "late_policy_status": None, "points_deducted": None,
            "seconds_late": 0, "workflow_state": "unsubmitted", "submission_type": None, "submission_comments": []}

    def hand_in(self, assignment_id: int, user_id: int, submitted_at: str, late: bool = False,
                excused: bool = False) -> dict:
        sub = self.submissions[assignment_id, user_id]
        sub.update(submitted_at=submitted_at, late=late, excused=excused, attempt=1, workflow_state="submitted",
                   submission_type="online_upload", seconds_late=3600 if late else 0)
        return sub

    def comments(self, assignment_id: int, user_id: int) -> list[dict]:
        return self.submissions[assignment_id, user_id]["submission_comments"]

    # Serving -----------------------------------------------------------------------------------------

    def start(self) -> str:
        """Serve on 127.0.0.1 on a free port; returns the base URL (no /api/v1, as canvasapi wants it)."""
        fake = self

        class Handler(_Handler):
            canvas = fake

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-canvas",
                         daemon=True).start()
        return self.url

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    canvas: FakeCanvas
    protocol_version = "HTTP/1.1"  # keep-alive, as Canvas serves
    disable_nagle_algorithm = True  # headers and body are two writes: without it each answer waits ~40 ms

    def log_message(self, format, *args):  # quiet: the tests read the log in FakeCanvas.requests
        pass

    def do_GET(self):
        self._serve("GET")

    def do_PUT(self):
        self._serve("PUT")

    def do_POST(self):
        self._serve("POST")

    # Plumbing -----------------------------------------------------------------------------------------

    def _serve(self, method: str) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        canvas = self.canvas
        with canvas.lock:
            canvas.in_flight += 1
        try:
            self._answer(method, parts, body)
        finally:
            with canvas.lock:
                canvas.in_flight -= 1

    def _answer(self, method: str, parts, body: bytes) -> None:
        canvas = self.canvas
        with canvas.lock:
            canvas.requests.append((method, parts.path))
            query = parse_qsl(parts.query, keep_blank_values=True)
            if parts.path.startswith("/files_api/upload/"):  # step 2: the upload URL, no token (its uuid)
                return self._upload(parts.path.rsplit("/", 1)[1], body)
            if (m := re.fullmatch(r"/api/v1/files/(\d+)/create_success", parts.path)) and method == "GET":
                return self._confirm(int(m.group(1)), dict(query).get("uuid", ""))
            if self.headers.get("Authorization") != f"Bearer {canvas.token}":
                return self._send(401, {"errors": [{"message": "Invalid access token."}]},
                                  {"WWW-Authenticate": 'Bearer realm="canvas-lms"'})
            allowed, remaining = canvas.bucket.take(canvas.in_flight)
            limits = {"X-Request-Cost": f"{canvas.bucket.cost if allowed else 0:.4f}",
                      "X-Rate-Limit-Remaining": f"{remaining:.4f}"}
            if not allowed:
                canvas.throttled += 1
                return self._send(403, THROTTLED_BODY, limits)
            form = parse_qsl(body.decode(), keep_blank_values=True) if body else []
            try:
                status, answer, headers = self._route(method, parts.path, query, form)
            except KeyError:
                status, answer, headers = 404, {"errors": [{"message": "The specified resource does not exist."}]}, {}
            self._send(status, answer, {**limits, **headers})

    def _send(self, status: int, answer, headers: dict[str, str]) -> None:
        data = (answer if isinstance(answer, str) else json.dumps(answer)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8" if not isinstance(answer, str)
                         else "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _page(self, path: str, query: list[tuple[str, str]], items: list) -> tuple[int, list, dict]:
        """One page of ``items`` and its Link header (basics/pagination)."""
        params = dict(query)
        per_page = max(1, min(100, int(params.get("per_page", 10))))
        page = max(1, int(params.get("page", 1)))
        last = max(1, -(-len(items) // per_page))
        kept = [(k, v) for k, v in query if k not in ("page", "per_page")]

        def link(n: int) -> str:
            return f"{self.canvas.url}{path}?{urlencode([*kept, ('page', n), ('per_page', per_page)])}"

        rels = [("current", page), ("first", 1), ("last", last)]
        if page < last:
            rels.insert(1, ("next", page + 1))
        if page > 1:
            rels.insert(1, ("prev", page - 1))
        header = ",".join(f'<{link(n)}>; rel="{rel}"' for rel, n in rels)
        return 200, items[(page - 1) * per_page: page * per_page], {"Link": header}

    # Endpoints --------------------------------------------------------------------------------------

    def _route(self, method: str, path: str, query, form) -> tuple[int, object, dict]:
        canvas = self.canvas
        course = f"/api/v1/courses/{canvas.course['id']}"
        if not path.startswith(course):
            raise KeyError(path)
        rest = path[len(course):]
        if rest == "" and method == "GET":
            return 200, canvas.course, {}
        if rest == "/assignments" and method == "GET":
            term = dict(query).get("search_term", "").casefold()
            found = [a for _, a in sorted(canvas.assignments.items()) if term in a["name"].casefold()]
            return self._page(path, query, found)
        if (m := re.fullmatch(r"/assignments/(\d+)", rest)) and method == "GET":
            return 200, canvas.assignments[int(m.group(1))], {}
        if rest in ("/users", "/search_users") and method == "GET":
            return self._page(path, query, [canvas.users[u] for u in sorted(canvas.users)])
        if rest == "/enrollments" and method == "GET":
            enrolments = [{"id": 70000 + u, "course_id": canvas.course["id"], "user_id": u, "type": "StudentEnrollment",
                           "role": "StudentEnrollment", "enrollment_state": "active", "sis_user_id":
                           canvas.users[u]["sis_user_id"], "user": canvas.users[u]} for u in sorted(canvas.users)]
            return self._page(path, query, enrolments)
        if (m := re.fullmatch(r"/assignments/(\d+)/submissions", rest)) and method == "GET":
            aid = int(m.group(1))
            canvas.assignments[aid]  # noqa: B018 (a KeyError is its 404)
            include = {v for k, v in query if k == "include[]"}
            subs = [self._submission(canvas.submissions[aid, u], include) for u in sorted(canvas.users)]
            return self._page(path, query, subs)
        if (m := re.fullmatch(r"/assignments/(\d+)/submissions/(\d+)", rest)) and method == "PUT":
            return 200, self._grade(canvas.submissions[int(m.group(1)), int(m.group(2))], form), {}
        if (m := re.fullmatch(r"/assignments/(\d+)/submissions/(\d+)/comments/files", rest)) and method == "POST":
            canvas.submissions[int(m.group(1)), int(m.group(2))]  # noqa: B018 (a KeyError is its 404)
            fields = dict(form)
            token = uuid.uuid4().hex
            canvas.pending[token] = {"name": fields["name"], "size": int(fields.get("size", 0))}
            return 200, {"upload_url": f"{canvas.url}/files_api/upload/{token}", "file_param": "file",
                         "upload_params": {"filename": fields["name"], "content_type": "text/html"}}, {}
        raise KeyError(path)

    def _submission(self, sub: dict, include: set[str]) -> dict:
        answer = {k: v for k, v in sub.items() if k != "submission_comments"}
        if "submission_comments" in include:
            answer["submission_comments"] = sub["submission_comments"]
        if "user" in include:
            answer["user"] = self.canvas.users[sub["user_id"]]
        return answer

    def _grade(self, sub: dict, form: list[tuple[str, str]]) -> dict:
        """Submissions API, "Grade or comment on a submission": posted_grade in points, a comment with files."""
        fields = dict(form)
        if "submission[posted_grade]" in fields:
            grade = fields["submission[posted_grade]"]
            score = float(grade)
            sub.update(score=score, grade=f"{score:g}", entered_score=score, entered_grade=f"{score:g}",
                       graded_at="2026-11-28T10:00:00Z", grader_id=1,
                       workflow_state="graded" if sub["submitted_at"] else sub["workflow_state"])
        text = fields.get("comment[text_comment]")
        file_ids = [int(v) for k, v in form if k == "comment[file_ids][]"]
        if text is not None or file_ids:
            sub["submission_comments"].append({
                "id": next(self.canvas._ids), "author_id": 1, "author_name": "Instructor",
                "author": {"id": 1, "display_name": "Instructor"}, "comment": text or "",
                "created_at": "2026-11-28T10:00:00Z", "edited_at": None, "media_comment": None,
                "attachments": [_public(self.canvas.files[i]) for i in file_ids]})
        return self._submission(sub, {"submission_comments"})

    def _upload(self, token: str, body: bytes) -> None:
        """Step 2: the multipart POST of the file; answered with the redirect to step 3."""
        announced = self.canvas.pending.get(token)
        if announced is None:
            return self._send(400, {"errors": [{"message": "unknown upload"}]}, {})
        message = email.message_from_bytes(
            f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode() + body, policy=email.policy.HTTP)
        data = next((part.get_payload(decode=True) for part in message.iter_parts()
                     if part.get_param("name", header="content-disposition") == "file"), None)
        if data is None:
            return self._send(400, {"errors": [{"message": "no file part"}]}, {})
        file_id = next(self.canvas._ids)
        self.canvas.files[file_id] = {
            "id": file_id, "uuid": token, "display_name": announced["name"], "filename": announced["name"],
            "content-type": "text/html", "size": len(data), "url": f"{self.canvas.url}/files/{file_id}/download",
            "contents": data.decode("utf-8", "replace")}
        self.send_response(301)
        self.send_header("Location", f"{self.canvas.url}/api/v1/files/{file_id}/create_success?uuid={token}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _confirm(self, file_id: int, token: str) -> None:
        """Step 3: the File object, once the upload's uuid is shown."""
        found = self.canvas.files.get(file_id)
        if found is None or found["uuid"] != token:
            return self._send(404, {"errors": [{"message": "The specified resource does not exist."}]}, {})
        self.canvas.pending.pop(token, None)
        self._send(200, _public(found), {})


def _public(file: dict) -> dict:
    """A File object as Canvas shows it (resources/files): without what the fake keeps to check."""
    return {k: v for k, v in file.items() if k not in ("uuid", "contents")}
