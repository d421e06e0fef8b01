"""LTI 1.3 Advantage, the tool's side (src/transformer_course/lms/lti.py): its keys and configuration, the
roster's matching, and the push through the real CLI against a platform on 127.0.0.1 that signs and verifies
(tests/lti_platform.py, built on lti1p3platform)."""

from __future__ import annotations

import json
import os
import stat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_course.lms import lti

FILLED = {"issuer": "https://canvas.instructure.com", "client_id": "10000000000042", "deployment_id": "7:abc",
          "token_url": "https://school.instructure.com/login/oauth2/token",
          "keyset_url": "https://school.instructure.com/api/lti/security/jwks",
          "lineitems_url": "https://school.instructure.com/api/lti/courses/42/line_items",
          "memberships_url": "https://school.instructure.com/api/lti/courses/42/names_and_roles"}


def test_init_makes_a_private_key_its_key_set_and_the_registration_documents(tmp_path):
    folder = tmp_path / "lti"
    written = lti.init(folder, FILLED)
    assert {p.name for p in written} == {"private.pem", "jwks.json", "tool.toml", "canvas-developer-key.json",
                                         "moodle.txt"}
    assert stat.S_IMODE((folder / "private.pem").stat().st_mode) == 0o600
    tool = lti.load(folder)
    assert (tool.issuer, tool.lineitems_url) == (FILLED["issuer"], FILLED["lineitems_url"])
    jwks = json.loads((folder / "jwks.json").read_text())
    assert jwks == lti.jwks_of(tool.public_key)  # the key set is the private key's public half
    [key] = jwks["keys"]
    assert key["kty"] == "RSA" and key["alg"] == "RS256" and "d" not in key  # nothing private in it
    canvas = json.loads((folder / "canvas-developer-key.json").read_text())
    assert canvas["public_jwk"] == key and set(canvas["scopes"]) == set(lti.SCOPES)
    assert "BEGIN PUBLIC KEY" in (folder / "moodle.txt").read_text()
    assert "PRIVATE" not in (folder / "moodle.txt").read_text() + json.dumps(canvas)
    with pytest.raises(lti.LtiError, match="already there"):  # a second init would undo the registration
        lti.init(folder, FILLED)
    assert lti.load(folder).public_key == tool.public_key


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t.replace('client_id = "10000000000042"', 'client_id = ""'), r"\[platform\] client_id is empty: it "
                                                                              r"is the tool's client id"),
    (lambda t: t.replace("https://school.instructure.com/login", "http://school.instructure.com/login"),
     r"token_url must be an https:// address"),
    (lambda t: t.replace("[course]", "[courses]"), r"unknown section \[courses\]; expected \[platform\], \[course\]"),
    (lambda t: t.replace("client_id =", "client-id ="), r"\[platform\] has no field client-id; its fields are "),
    (lambda t: t.replace('"https://canvas.instructure.com"', '"canvas.instructure.com"'), r"issuer must be an https"),
    (lambda t: t + "\n[[", r"not TOML"),
])
def test_a_wrong_field_is_named_with_what_it_should_hold(tmp_path, edit, message):
    lti.init(tmp_path, FILLED)
    path = tmp_path / "tool.toml"
    path.write_text(edit(path.read_text()))
    with pytest.raises(lti.LtiError, match=message):
        lti.load(tmp_path)


def test_a_key_others_can_read_or_not_rsa_is_refused(tmp_path):
    lti.init(tmp_path, FILLED)
    os.chmod(tmp_path / "private.pem", 0o640)
    with pytest.raises(lti.LtiError, match=r"chmod 600"):
        lti.load(tmp_path)
    (tmp_path / "private.pem").unlink()
    with pytest.raises(lti.LtiError, match=r"private key is not there"):
        lti.load(tmp_path)
    fd = os.open(tmp_path / "private.pem", os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    os.close(fd)
    with pytest.raises(lti.LtiError, match=r"not an unencrypted PEM private key"):
        lti.load(tmp_path)


def member(uid, name="", email="", sis="", **extra):
    return {"user_id": uid, "name": name, "email": email, "lis_person_sourcedid": sis, "status": "Active",
            "roles": [lti.LEARNER], **extra}


def test_students_are_matched_in_the_documented_order_and_an_ambiguous_one_is_not():
    people = [member("u1", "Ada L", "ada.l@school.edu", sis="S-1"),  # by SIS id
              member("dev", "Dev P", "dp@school.edu"),  # by user id
              member("u3", "Cho K", "cho@school.edu"),  # by login (the email's local part)
              member("u4", "Eun J", "eun.j@school.edu"),  # by the email students.csv gives
              member("u5", "Fay A", "fay@a.edu"), member("u6", "Fay B", "fay@b.edu")]  # two "fay" logins
    students = {"ada": {"sis_user_id": "S-1"}, "dev": {}, "cho": {}, "eun": {"email": "EUN.J@school.edu"},
                "fay": {}, "zed": {"name": "Zed Z"}}
    rows, said = lti.match(students, people, {})
    got = {r["student_id"]: (r["lms_user_id"], r["matched_by"]) for r in rows}
    assert got == {"ada": ("u1", "sis id"), "dev": ("dev", "lms user id"), "cho": ("u3", "login"),
                   "eun": ("u4", "email"), "fay": ("", ""), "zed": ("", "")}
    assert [line.split(":")[0].strip() for line in said] == ["fay", "zed"]
    assert "2 members match by login" in said[0]
    # The instructor's row wins, and its member is no one else's.
    rows, said = lti.match(students, people, {"fay": {"lms_user_id": "u6", "matched_by": lti.BY_HAND},
                                              "cho": {"lms_user_id": "u1", "matched_by": lti.BY_HAND}})
    got = {r["student_id"]: (r["lms_user_id"], r["matched_by"]) for r in rows}
    assert got["fay"] == ("u6", lti.BY_HAND) and got["cho"] == ("u1", lti.BY_HAND)
    assert got["ada"] == ("", "")  # u1 is taken by hand: ada is unmatched, not sent to cho's account
    # A stronger rule is used for the whole class first: bob's user id before alice's login (the email's).
    rows, _ = lti.match({"alice": {}, "bob": {}}, [member("bob", email="alice@x.edu")], {})
    assert [(r["student_id"], r["lms_user_id"]) for r in rows] == [("alice", ""), ("bob", "bob")]


ids = st.text(st.characters(min_codepoint=48, max_codepoint=122), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(students=st.dictionaries(ids, st.fixed_dictionaries({}, optional={"email": ids, "sis_user_id": ids}),
                                max_size=8),
       people=st.lists(st.builds(member, ids, email=ids.map(lambda s: s + "@x.edu"), sis=ids), max_size=8,
                       unique_by=lambda m: m["user_id"]))
def test_no_member_is_matched_to_two_students_and_every_match_is_by_a_rule(students, people):
    rows, said = lti.match(students, people, {})
    matched = [r["lms_user_id"] for r in rows if r["lms_user_id"]]
    assert len(matched) == len(set(matched))  # one LMS account never gets two students' grades
    assert sorted(r["student_id"] for r in rows) == sorted(students)
    by_id = {m["user_id"]: m for m in people}
    rules = dict(lti.RULES)
    for r in rows:
        if r["lms_user_id"]:
            assert rules[r["matched_by"]](r["student_id"], students[r["student_id"]], by_id[r["lms_user_id"]])
    assert sum("UNMATCHED" in line for line in said) == len(rows) - len(matched)  # every unmatched one named


def test_the_score_says_pending_while_answers_in_words_await_and_links_the_page():
    from transformer_course.lms.push import Outgoing

    item = Outgoing("ada", "01_self_attention", 11.0, 15.0, "01_self_attention: 11/15 points", awaiting=True)
    score = lti.score_of(item, "u1", "https://c.example/fb/{student_id}/{assignment}.html")
    assert (score["gradingProgress"], score["activityProgress"]) == ("PendingManual", "Completed")
    assert score["comment"].endswith("https://c.example/fb/ada/01_self_attention.html")
    assert (score["scoreGiven"], score["scoreMaximum"], score["userId"]) == (11.0, 15.0, "u1")
    done = lti.score_of(Outgoing("ada", "01_self_attention", 15.0, 15.0, "c"), "u1")
    assert done["gradingProgress"] == "FullyGraded" and done["comment"] == "c"


# Against a platform on 127.0.0.1 --------------------------------------------------------------------------

A = "01_self_attention"




def make_tool(folder, platform):
    """``lti init`` through the CLI with the platform's addresses; the platform then trusts the tool's key."""
    from transformer_course.cli import main

    assert main(["lti", "init", str(folder), "--issuer", platform.issuer, "--client-id", platform.client_id,
                 "--deployment-id", platform.deployment_id, "--token-url", platform.token_url,
                 "--keyset-url", platform.jwks_url, "--lineitems-url", platform.lineitems_url,
                 "--memberships-url", platform.memberships_url]) == 0
    return json.loads((folder / "jwks.json").read_text())


def results(out, rows):
    """``OUT/results.json`` as ``grade`` writes it, for the rows given as (student, autograded points, late
    penalty, points in words or None while formgrader has them to grade)."""
    out.mkdir(parents=True, exist_ok=True)
    body = []
    for student, auto, penalty, manual, *rest in rows:
        body.append({"student_id": student, "assignment": A, "status": "graded", "reason": "",
                     "exercises": [{"exercise": "softmax", "score": auto, "max_score": 11.0, "feedback": ""}],
                     "late_penalty": penalty, "excused": bool(rest and rest[0] == "excused"),
                     "manual_score": manual, "manual_max_score": 4.0,
                     "manual_status": "awaiting" if manual is None else "graded", "overrides": [],
                     "score": auto, "max_score": 11.0, "final_score": max(0.0, auto - penalty)})
    (out / "results.json").write_text(json.dumps(body))


@pytest.fixture
def lms(tmp_path):
    """A platform with five learners, a tool registered with it, a class of five in OUT."""
    from tests.lti_platform import LocalPlatform

    people = [member("u-ada", "Ada Lovelace", "ada@school.edu", sis="ada"),
              member("u-ben", "Ben Okafor", "ben@school.edu"), member("u-cho", "Cho Kim", "cho@school.edu"),
              member("u-eve", "Eve Nohandin", "eve@school.edu"), member("u-fay", "Fay Aziz", "fay@school.edu")]
    folder = tmp_path / "lti"
    with LocalPlatform({"keys": []}, members=people, page_size=2) as platform:
        platform.trust(make_tool(folder, platform))
        out = tmp_path / "out"
        results(out, [("ada", 11.0, 0.0, None), ("ben", 8.0, 1.0, 3.0), ("cho", 5.0, 0.0, 2.0),
                      ("zed", 9.0, 0.0, 4.0), ("fay", 7.0, 0.0, 1.0, "excused")])
        yield platform, folder, out


def cli(*argv):
    from transformer_course.cli import main

    return main(["lti", *map(str, argv)])


def test_a_class_is_pushed_once_resumed_and_graded_by_hand_later(lms, capsys):
    platform, folder, out = lms
    assert cli("check", folder, "--online") == 0
    assert capsys.readouterr().out.count("granted:") == len(lti.SCOPES)
    assert cli("roster", folder, out) == 0
    said = capsys.readouterr().out
    assert "4 of 5 students matched to the LMS's 5 learners; 1 learner matched to no student" in said
    assert "zed: UNMATCHED" in said
    roster = {r["student_id"]: r for r in lti.read_roster(folder).values()}
    assert roster["ada"]["matched_by"] == "sis id" and roster["ben"]["matched_by"] == "login"
    assert roster["ada"]["name"] == "Ada Lovelace"
    assert "ada,Ada Lovelace" in (out / "roster.csv").read_text()  # the LMS's names, for report's pages

    assert cli("push", folder, out, "--assignment", "01", "--dry-run") == 0
    assert "dry run: nothing sent (3 would be)" in capsys.readouterr().out
    assert platform.line_items == {}  # a dry run creates nothing

    assert cli("push", folder, out, "--assignment", "01", "--feedback-url",
               "https://course.example.edu/fb/{student_id}/{assignment}.html") == 0
    said = capsys.readouterr().out
    assert "zed            NOT SENT: not matched" in said and "fay            held back: excused" in said
    # docs/lti.md shows this class's push: its student lines are this run's (paths aside)
    from pathlib import Path

    guide = (Path(__file__).parents[1] / "docs" / "lti.md").read_text()
    shown = [ln.strip() for ln in said.splitlines() if ln.startswith(("  ada", "  ben", "  cho", "  fay", "01_"))]
    assert len(shown) == 5 and all(ln in guide for ln in shown), shown
    item = platform.line_item(resource_id=A)
    assert item["scoreMaximum"] == 15.0 and item["label"] == A and item["tag"] == lti.TAG
    ada = platform.result(item["id"], "u-ada")
    assert (ada["scoreGiven"], ada["gradingProgress"], ada["activityProgress"]) == (11.0, "PendingManual",
                                                                                   "Completed")
    ben = platform.result(item["id"], "u-ben")
    assert (ben["scoreGiven"], ben["gradingProgress"]) == (10.0, "FullyGraded")  # 8 - 1 late + 3 in words
    assert ben["comment"].startswith(f"{A}: 10/15 points (autograded tests 8/11, late penalty -1, answers in "
                                     "words 3/4)") and ben["comment"].endswith(f"/fb/ben/{A}.html")
    assert not any("zed" in json.dumps(s) for u in ("u-eve",) for s in platform.scores(item["id"], u))
    assert platform.scores(item["id"], "u-eve") == []

    # Again: nothing new is sent.
    posts = sum(1 for r in platform.requests if r[0] == "POST")
    assert cli("push", folder, out, "--assignment", "01", "--feedback-url",
               "https://course.example.edu/fb/{student_id}/{assignment}.html") == 0
    assert "0 to send, 3 already sent" in capsys.readouterr().out
    assert sum(1 for r in platform.requests if r[0] == "POST" and "/scores" in r[1]) == 3
    assert sum(1 for r in platform.requests if r[0] == "POST") - posts <= 1  # a token at most

    # A student who joined late: in the LMS and in the class; only that score is new.
    platform.add_member(member("u-gus", "Gus Grey", "gus@school.edu"))
    results(out, [("ada", 11.0, 0.0, None), ("ben", 8.0, 1.0, 3.0), ("cho", 5.0, 0.0, 2.0), ("zed", 9.0, 0.0, 4.0),
                  ("fay", 7.0, 0.0, 1.0, "excused"), ("gus", 10.0, 0.0, 4.0)])
    assert cli("roster", folder, out) == 0
    assert cli("push", folder, out, "--assignment", "01", "--feedback-url",
               "https://course.example.edu/fb/{student_id}/{assignment}.html") == 0
    assert "1 to send, 3 already sent, 1 unmatched, 1 held back" in capsys.readouterr().out
    assert platform.result(item["id"], "u-gus")["scoreGiven"] == 14.0

    # ada's answers in words graded in formgrader (4 of 4), the token expired meanwhile, a 429 on the way.
    results(out, [("ada", 11.0, 0.0, 4.0), ("ben", 8.0, 1.0, 3.0), ("cho", 5.0, 0.0, 2.0), ("zed", 9.0, 0.0, 4.0),
                  ("fay", 7.0, 0.0, 1.0, "excused"), ("gus", 10.0, 0.0, 4.0)])
    platform.expire_tokens()
    platform.fail_next(429, retry_after=0.1, path_contains="/scores")
    assert cli("push", folder, out, "--assignment", "01", "--feedback-url",
               "https://course.example.edu/fb/{student_id}/{assignment}.html") == 0
    said = capsys.readouterr().out
    [ada_line] = [ln for ln in said.splitlines() if ln.startswith("  ada ")]
    assert ada_line.endswith("15/15 FullyGraded   (changed: points, progress, comment)"), ada_line
    assert [(s["scoreGiven"], s["gradingProgress"]) for s in platform.scores(item["id"], "u-ada")] == [
        (11.0, "PendingManual"), (15.0, "FullyGraded")]
    assert len(platform.scores(item["id"], "u-ben")) == 1 and len(platform.line_items) == 1
    log = (out / lti.LOG).read_text()
    assert log.count('"status": 200') == 5 and "BEGIN" not in log and "Bearer" not in log
    assert platform.tokens_issued >= 2  # the expired token was renewed


def test_a_push_stopped_half_way_resumes_without_sending_twice(lms, monkeypatch, capsys):
    """Ctrl-C (SIGINT to the process) while the second score is on its way: what the platform accepted is in
    the log, and the push run again sends only the rest."""
    import re
    import signal

    platform, folder, out = lms
    assert cli("roster", folder, out) == 0
    from pylti1p3.assignments_grades import AssignmentsGradesService

    real, calls = AssignmentsGradesService.put_grade, []

    def interrupted(self, grade, lineitem=None):
        calls.append(grade)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # the main thread gets KeyboardInterrupt; this send goes on
        return real(self, grade, lineitem)

    monkeypatch.setattr(AssignmentsGradesService, "put_grade", interrupted)
    # Python's own Ctrl-C handler, whatever this run inherited: a shell's background job starts with SIGINT
    # ignored, and then no Ctrl-C would reach the push at all.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            cli("push", folder, out, "--assignment", "01", "--parallel", "1")
    finally:
        signal.signal(signal.SIGINT, previous)
    monkeypatch.setattr(AssignmentsGradesService, "put_grade", real)
    item = platform.line_item(resource_id=A)
    users = ("u-ada", "u-ben", "u-cho")
    accepted = sum(len(platform.scores(item["id"], u)) for u in users)
    assert 1 <= accepted < 3 and (out / lti.LOG).read_text().count('"status": 200') == accepted
    capsys.readouterr()
    assert cli("push", folder, out, "--assignment", "01") == 0
    said = capsys.readouterr().out
    assert re.search(rf"{3 - accepted} to send, {accepted} already sent", said), said
    assert [len(platform.scores(item["id"], u)) for u in users] == [1, 1, 1]  # no one twice


def test_a_refused_score_is_one_line_and_a_refused_scope_stops_the_push(lms, capsys):
    platform, folder, out = lms
    assert cli("roster", folder, out) == 0
    roster = (folder / lti.ROSTER).read_text().replace("zed,,", "zed,u-ghost,").replace(
        "zed,u-ghost,,,,", f"zed,u-ghost,,,,{lti.BY_HAND}")
    (folder / lti.ROSTER).write_text(roster)  # the instructor matched zed by hand to a user not in the course
    capsys.readouterr()
    assert cli("push", folder, out, "--assignment", "01") == 1
    said = capsys.readouterr().out
    item = platform.line_item(resource_id=A)
    [line] = [ln for ln in said.splitlines() if ln.startswith("  REFUSED")]
    assert line.startswith("  REFUSED zed: the LMS refused the score of student zed (LMS user u-ghost) in line "
                           f"item {item['id']}")
    assert [len(platform.scores(item["id"], u)) for u in ("u-ada", "u-ben", "u-cho")] == [1, 1, 1]

    results(out, [("ada", 10.0, 0.0, None), ("ben", 8.0, 1.0, 3.0), ("cho", 5.0, 0.0, 2.0)])
    platform.refuse_scope(lti.SCOPE_SCORE)
    platform.expire_tokens()
    assert cli("push", folder, out, "--assignment", "01") == 1
    err = capsys.readouterr().err
    assert f"the LMS did not grant {lti.SCOPE_SCORE}" in err and err.count("\n") == 1
    assert lti.SCOPE_MEMBERS not in err  # only what this call asked for
    platform.refuse_scope(lti.SCOPE_LINEITEM)  # now no scope the push asks for: the token itself is refused
    platform.expire_tokens()
    assert cli("push", folder, out, "--assignment", "01") == 1
    assert "the LMS grants none of the scopes asked for" in capsys.readouterr().err
    assert len(platform.scores(item["id"], "u-ada")) == 1


def test_check_online_names_a_scope_the_lms_refuses(lms, capsys):
    platform, folder, _ = lms
    platform.refuse_scope(lti.SCOPE_MEMBERS)
    assert cli("check", folder, "--online") == 1
    said = capsys.readouterr().out
    assert f"REFUSED: {lti.SCOPE_MEMBERS}" in said and f"granted: {lti.SCOPE_SCORE}" in said


def test_done_when_a_graded_class_reaches_the_lms_with_its_extension_its_words_and_its_unmatched(repo, tmp_path,
                                                                                                  capsys):
    """Issue 61's "done when": graded for real (three notebooks), ada late but extended, dev late, eun not in the
    LMS; the first push before formgrader, the second after ada's and dev's answers in words are graded."""
    import shutil

    from tests.conftest import GRADING_TIMEOUT
    from tests.lti_platform import LocalPlatform
    from tests.test_manual import gradebook, put_grade
    from transformer_course.cli import main

    submitted = tmp_path / "submitted"
    solution, unstable = repo.solutions / f"{A}.ipynb", repo.sample_class / "dev" / A / f"{A}.ipynb"
    for student, source, when in (("ada", solution, "2026-11-24 04:00:00.000000 UTC"),
                                  ("dev", unstable, "2026-11-24 10:00:00.000000 UTC"),
                                  ("eun", solution, "2026-11-23 12:00:00.000000 UTC")):
        (submitted / student / A).mkdir(parents=True)
        shutil.copy(source, submitted / student / A / f"{A}.ipynb")
        (submitted / student / A / "timestamp.txt").write_text(when)
    deadlines = tmp_path / "deadlines.toml"
    deadlines.write_text('due = "2026-11-23T18:00:00+01:00"\nstart = "2026-10-05T09:00:00+02:00"\n'
                         '[late]\npolicy = "fixed"\npoints = 1\n'
                         '[extensions]\n"ada" = { "01_self_attention" = 24 }\n')
    out = tmp_path / "out"
    assert main(["grade", str(submitted), "--out", str(out), "--assignment", "01", "--workers", "1", "--timeout",
                 str(GRADING_TIMEOUT), "--deadlines", str(deadlines)]) == 0
    people = [member("1001", "Ada Lovelace", "ada@school.edu"), member("1002", "Dev Patel", "dev@school.edu")]
    with LocalPlatform({"keys": []}, members=people) as platform:
        platform.trust(make_tool(tmp_path / "lti", platform))
        assert cli("roster", tmp_path / "lti", out) == 0
        assert "eun: UNMATCHED" in capsys.readouterr().out
        assert cli("push", tmp_path / "lti", out, "--assignment", "01") == 0
        item = platform.line_item(resource_id=A)
        first = {u: (s["scoreGiven"], s["gradingProgress"]) for u in ("1001", "1002")
                 for s in platform.scores(item["id"], u)}
        assert first == {"1001": (11.0, "PendingManual"), "1002": (7.0, "PendingManual")}  # dev: 8 - 1 late

        questions = [q.grade_id for q in repo.assignment(A).questions]
        with gradebook(out) as gb:
            for question, ada, dev in zip(questions, (2, 2), (1, 0), strict=True):
                put_grade(gb, question, {"manual_score": ada}, student="ada")
                put_grade(gb, question, {"manual_score": dev}, student="dev")
        assert main(["report", str(out)]) == 0
        capsys.readouterr()
        assert cli("push", tmp_path / "lti", out, "--assignment", "01") == 0
        assert "2 to send, 0 already sent, 1 unmatched" in capsys.readouterr().out
        last = {u: (s["scoreGiven"], s["scoreMaximum"], s["gradingProgress"], s["comment"])
                for u in ("1001", "1002") for s in platform.scores(item["id"], u)[-1:]}
        assert last["1001"][:3] == (15.0, 15.0, "FullyGraded") and last["1002"][:3] == (8.0, 15.0, "FullyGraded")
        assert last["1002"][3].startswith(f"{A}: 8/15 points (autograded tests 8/11, late penalty -1, answers in "
                                          "words 1/4)")
        assert "late penalty" not in last["1001"][3]  # the extension: on time
        assert len(platform.scores(item["id"], "1001")) == 2 and len(platform.line_items) == 1
        assert not any("eun" in json.dumps(s) for u in ("1001", "1002") for s in platform.scores(item["id"], u))


@settings(max_examples=25, deadline=None)
@given(name=st.one_of(st.text(st.characters(blacklist_categories=("Cs",)), max_size=80),
                     st.sampled_from(['=HYPERLINK("http://x","y")', "+SUM(A1:A9)", "-2+3", "@cmd", "\u202eevil",
                                      "a\x1bb\r\n=1"])),
       email=st.one_of(st.text(st.characters(blacklist_categories=("Cs",)), max_size=30),
                       st.sampled_from(["=1+1@x.edu", "+a@x.edu"])))
def test_what_the_lms_says_of_a_member_reaches_the_roster_as_text(tmp_path_factory, name, email):
    """A name or email the LMS sends (typed by whoever enrolled) is written to roster.csv and lms-learners.csv
    as text: no formula a spreadsheet would run, no control or bidirectional character, the ids intact."""
    import csv

    folder = tmp_path_factory.mktemp("lti")
    rows, _ = lti.match({"ada": {}}, [member("ada", name, email)], {})
    lti.atomic_write(folder / lti.ROSTER, lti.csv_text([lti.ROSTER_HEADER,
                                                        *[[r[k] for k in lti.ROSTER_HEADER] for r in rows]]))
    with open(folder / lti.ROSTER, newline="") as f:
        [back] = list(csv.DictReader(f))  # as a spreadsheet reads it
    assert back["student_id"] == "ada" and back["lms_user_id"] == "ada"
    assert lti.read_roster(folder)["ada"]["email"] == email.strip()  # and back exactly, for the tool
    for cell in (back["name"], back["email"]):
        assert not cell.startswith(("=", "+", "-", "@")), cell
    assert not any(c in back["name"] for c in "\u202e\u2066\x00\x1b\r")


def test_names_from_the_lms_keep_the_roster_files_other_columns_and_a_hand_row_survives_its_spelling(tmp_path):
    from transformer_course.grading.output.spreadsheet import read_rows

    path = tmp_path / "roster.csv"
    path.write_text("student_id,name,email\nada,,ada@school.edu\nben,Ben O,ben@school.edu\n")
    lti._add_names(path, {"ada": "Ada Lovelace", "ben": "Someone Else", "cho": "Cho Kim"})
    assert read_rows(path) == [{"student_id": "ada", "name": "Ada Lovelace", "email": "ada@school.edu"},
                               {"student_id": "ben", "name": "Ben O", "email": "ben@school.edu"},  # kept
                               {"student_id": "cho", "name": "Cho Kim", "email": ""}]
    for spelt in ("By hand", "by-hand", " BY_HAND "):
        rows, _ = lti.match({"hal": {}}, [member("u9")], {"hal": {"lms_user_id": "u9", "matched_by": spelt}})
        assert (rows[0]["lms_user_id"], rows[0]["matched_by"]) == ("u9", lti.BY_HAND), spelt
