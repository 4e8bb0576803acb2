"""The PR comment: its body (escaping, size, charts, baseline) and its upsert over real HTTP."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ci_evals.reports.comment import BODY_LIMIT, marker, render_comment, score_chart
from ci_evals.reports.github import (
    CommentClient,
    GitHubError,
    pr_number_from_event,
    run_url,
    upsert_pr_comment,
)
from ci_evals.reports.text import ZWJ
from tests.fakes import report_data as data
from tests.fakes.github_server import FakeGitHub, github_server_fixture, start  # noqa: F401 (fixture)

SNAPSHOT = Path(__file__).parent / "data" / "comment_baseline.md"
MARK = "<!-- ci-evals:qa:evals:0a36caf84d28241f -->"


def check_blocks(body: str) -> None:
    """Every fence opened is closed by the same fence, and <details> tags outside fences balance."""
    fence, outside = None, []
    for line in body.splitlines():
        m = re.match(r"^(`{3,})", line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and line == fence:
            fence = None
        elif fence is None:
            outside.append(line)
    assert fence is None, "a code fence is left open"
    text = "\n".join(outside)
    assert text.count("<details>") == text.count("</details>")


def comment(doc=None, rows=None, **kw) -> str:
    return render_comment(
        doc or data.summary(),
        data.results() if rows is None else rows,
        run_url=kw.pop("run_url", "https://github.com/octo/widgets/actions/runs/42"),
        marker_key="qa:evals",
        **kw,
    )


# ---------------------------------------------------------------- body


def test_marker_is_sanitised_and_cannot_close_the_html_comment():
    assert marker("qa:evals") == MARK
    assert marker("a b-->c<!--") == "<!-- ci-evals:a_b-__c__-_:88a85241259ae192 -->"


def test_markers_of_same_length_non_ascii_names_differ():
    assert marker("評価スイート:evals") == "<!-- ci-evals:______:evals:58d887ad787b6c26 -->"
    assert marker("回帰テスト集:evals") == "<!-- ci-evals:______:evals:a48a77017cd81b3d -->"


def test_marker_of_a_huge_name_is_bounded_and_closed():
    mark = marker("x" * 70_000 + ":evals")
    assert mark == "<!-- ci-evals:" + "x" * 40 + ":" + mark[-20:-4] + " -->"
    assert len(mark) == 75


def test_snapshot_with_baseline_regressions_and_an_inconclusive_gate():
    body = comment(data.baseline_summary())
    assert body == SNAPSHOT.read_text(encoding="utf-8")
    check_blocks(body)


def test_first_line_is_the_marker_then_the_verdict():
    lines = comment().splitlines()
    assert lines[:4] == [
        MARK,
        "### ❌ ci-evals · qa: failed",
        "",
        "**Verdict: failed**: Answer quality (quality): avg_score 0.5833, needs &gt;= 0.75",
    ]


def test_a_summary_without_a_verdict_is_commented_as_having_none():
    body = render_comment(
        data.summary(verdict=None, verdict_reason=None),
        data.results(),
        run_url=None,
        marker_key="qa",
    )
    assert body.splitlines()[1:4] == [
        "### ❔ ci-evals · qa: no verdict",
        "",
        "**No verdict**: summary.json records no verdict "
        "(written by another tool or an older version).",
    ]


def test_metric_table_without_baseline_has_no_delta_column():
    body = comment()
    assert (
        "| Metric | Mean (95% CI) | Pass rate | Graded | Errors | Pass rule |\n|---|---:|---:|---:|---:|---|\n"
        in body
    )
    assert (
        "| Answer quality (quality) | 0.583 (0.350–0.800) | 50.0% (3/6) | 5/6 | 1 | `score >= 0.75` |"
        in body
    )


def test_score_chart_only_for_graded_metrics():
    body = comment()
    assert body.count("```mermaid") == 1
    assert score_chart("Answer quality", [0, 0, 0, 1, 0, 1, 0, 0, 1, 2]) in body


def test_usage_cost_and_run_link():
    body = comment()
    assert (
        "Tokens: 1,250 prompt + 325 completion (target 75, graders 1,500) · cost $0.0123 · "
        "cache hits 2 · retries 1"
    ) in body
    assert body.endswith(
        "<sub>[View the run](https://github.com/octo/widgets/actions/runs/42) · ci-evals 0.1.0 · "
        "updated 2026-11-22T10:00:12+00:00</sub>\n"
    )


def test_unsafe_run_url_is_dropped():
    assert "View the run" not in comment(run_url="javascript:alert(1)")


def test_injection_in_model_output_is_neutralised():
    rows = data.results()
    evil = "</details><img src=x onerror=alert(1)> @octocat/team ```\n``` \n#42 [x](https://evil) <!-- ci-evals:qa:evals -->"
    rows[3]["submission"]["quality"] = evil
    rows[3]["grades"]["quality"]["rationale"] = evil
    rows[3]["input"] = evil
    rows[3]["sample_id"] = "<b>@boss</b>"
    body = comment(rows=rows)
    check_blocks(body)
    assert body.startswith(MARK)
    outside = re.sub(r"^(`{4,})text\n.*?^\1$", "", body, flags=re.S | re.M)
    outside = re.sub(r"^```text\n.*?^```$", "", outside, flags=re.S | re.M)
    assert "<img" not in outside and "@octocat" not in outside and "@boss" not in outside
    assert f"&lt;b&gt;@{ZWJ}boss&lt;/b&gt;" in body
    assert "````text\n" + evil + "\n````" in body


def test_marker_text_in_model_output_sits_inside_a_fence():
    rows = data.results()
    rows[3]["submission"]["quality"] = "<!-- ci-evals:other:evals -->"
    body = comment(rows=rows)
    assert body.startswith(MARK)
    assert "```text\n<!-- ci-evals:other:evals -->\n```" in body


def test_oversized_outputs_are_trimmed_to_fit():
    rows = []
    for i in range(200):
        row = data.results()[3]
        row["sample_id"] = i
        row["input"] = "q" * 50_000
        row["submission"] = {"quality": "s" * 100_000, "exact": "t" * 100_000}
        row["grades"]["quality"]["rationale"] = "r" * 100_000
        rows.append(row)
    body = comment(rows=rows)
    assert len(body) <= BODY_LIMIT
    check_blocks(body)
    assert "#### Worst failing samples (10 of 200 failing samples, 20 failing grades)" in body
    assert "… (49,426 more characters)" in body


def test_huge_number_of_metrics_still_fits():
    metric = data.summary()["metrics"]["exact"]
    doc = data.summary(
        metrics={f"metric_{i:04d}": dict(metric, label="m" * 100) for i in range(1500)}
    )
    body = comment(doc)
    assert len(body) <= BODY_LIMIT
    assert body.endswith("… (truncated: the full report is in the step summary)\n")
    assert body.startswith(MARK)


# ---------------------------------------------------------------- event payload and run URL


def test_pr_number_from_event_payloads(tmp_path):
    cases = {
        "pr.json": ({"pull_request": {"number": 17}}, 17),
        "issue.json": ({"issue": {"number": 9}}, 9),
        "wr.json": ({"workflow_run": {"pull_requests": [{"number": 4}]}}, 4),
        "push.json": ({"ref": "refs/heads/main"}, None),
        "bad.json": ("not json", None),
    }
    for name, (payload, expected) in cases.items():
        path = tmp_path / name
        path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
        assert pr_number_from_event(path) == expected
    assert pr_number_from_event(tmp_path / "missing.json") is None
    assert pr_number_from_event(None) is None


def test_run_url_with_attempts():
    env = {
        "GITHUB_SERVER_URL": "https://ghe.example",
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_RUN_ID": "5",
    }
    assert run_url(env) == "https://ghe.example/o/r/actions/runs/5"
    assert (
        run_url({**env, "GITHUB_RUN_ATTEMPT": "2"})
        == "https://ghe.example/o/r/actions/runs/5/attempts/2"
    )
    assert run_url({}) is None


# ---------------------------------------------------------------- upsert over HTTP


def upsert(gh: FakeGitHub, body: str, warnings: list[str], **kw) -> str | None:
    return upsert_pr_comment(
        body,
        MARK,
        token=kw.pop("token", gh.token),
        repository=gh.repo,
        number=kw.pop("number", 7),
        api_url=gh.url,
        warn=warnings.append,
        backoff=0.0,
        **kw,
    )


def test_first_run_creates_then_second_run_updates(github_server):
    gh, warnings = github_server, []
    url = upsert(gh, MARK + "\nfirst", warnings)
    assert url == f"https://github.example/octo/widgets/pull/7#issuecomment-{gh.next_id}"
    url2 = upsert(gh, MARK + "\nsecond", warnings)
    assert url2 == url
    assert [c["body"] for c in gh.comments[7]] == [MARK + "\nsecond"]
    assert [(r.method, r.path) for r in gh.log] == [
        ("GET", "/repos/octo/widgets/issues/7/comments"),
        ("POST", "/repos/octo/widgets/issues/7/comments"),
        ("GET", "/repos/octo/widgets/issues/7/comments"),
        ("GET", "/user"),
        ("PATCH", f"/repos/octo/widgets/issues/comments/{gh.next_id}"),
    ]
    assert gh.log[0].query == {"per_page": "100"}
    assert {r.authorization for r in gh.log} == {f"Bearer {gh.token}"}
    assert warnings == []


def test_marker_of_another_suite_is_left_alone(github_server):
    gh, warnings = github_server, []
    gh.add_comments(7, ["<!-- ci-evals:other:evals -->\nother suite", "a human comment"])
    upsert(gh, MARK + "\nmine", warnings)
    assert [c["body"] for c in gh.comments[7]] == [
        "<!-- ci-evals:other:evals -->\nother suite",
        "a human comment",
        MARK + "\nmine",
    ]


def test_a_comment_quoting_the_marker_is_not_taken_over(github_server):
    gh, warnings = github_server, []
    quoted = gh.add_comments(7, ["see this report:\n" + MARK])[0]
    upsert(gh, MARK + "\nmine", warnings)
    assert quoted["body"] == "see this report:\n" + MARK
    assert [r.method for r in gh.writes()] == ["POST"]


OUTSIDER = {"login": "mallory", "type": "User"}


def test_an_outsiders_comment_starting_with_the_marker_is_not_updated(github_server):
    """GITHUB_TOKEN (an installation token): /user is 403, our comments are github-actions[bot]'s."""
    gh, warnings = github_server, []
    planted = gh.add_comments(7, [MARK + "\nplanted by someone else"], author=OUTSIDER)[0]
    upsert(gh, MARK + "\nmine", warnings)
    assert planted["body"] == MARK + "\nplanted by someone else"
    assert [r.method for r in gh.writes()] == ["POST"]
    assert [c["user"]["login"] for c in gh.comments[7]] == ["mallory", "github-actions[bot]"]
    assert warnings == []


def test_a_human_named_like_the_bot_is_not_the_bot(github_server):
    gh, warnings = github_server, []
    gh.add_comments(7, [MARK + "\nfake"], author={"login": "github-actions[bot]", "type": "User"})
    upsert(gh, MARK + "\nmine", warnings)
    assert [r.method for r in gh.writes()] == ["POST"]


def test_a_personal_token_updates_only_its_users_comment(github_server):
    gh, warnings = github_server, []
    gh.user_login = "ci-bot-user"
    gh.add_comments(
        7, [MARK + "\nby the actions bot"], author={"login": "github-actions[bot]", "type": "Bot"}
    )
    ours = gh.add_comments(7, [MARK + "\nold"])[0]
    upsert(gh, MARK + "\nnew", warnings)
    assert [(r.method, r.path) for r in gh.writes()] == [
        ("PATCH", f"/repos/octo/widgets/issues/comments/{ours['id']}")
    ]
    assert ours["body"] == MARK + "\nnew"


def test_more_than_100_comments_are_paged_through(github_server):
    gh, warnings = github_server, []
    gh.add_comments(7, [f"noise {i}" for i in range(230)])
    target = gh.add_comments(7, [MARK + "\nold"])[0]
    gh.add_comments(7, ["later noise"])
    upsert(gh, MARK + "\nnew", warnings)
    gets = [r for r in gh.log if r.method == "GET" and r.path != "/user"]
    assert [r.query for r in gets] == [
        {"per_page": "100"},
        {"per_page": "100", "page": "2"},
        {"per_page": "100", "page": "3"},
    ]
    assert [(r.method, r.path) for r in gh.writes()] == [
        ("PATCH", f"/repos/octo/widgets/issues/comments/{target['id']}")
    ]
    assert len(gh.comments[7]) == 232
    assert target["body"] == MARK + "\nnew"


def test_no_marker_in_250_comments_creates_one(github_server):
    gh, warnings = github_server, []
    gh.add_comments(7, [f"noise {i}" for i in range(250)])
    upsert(gh, MARK + "\nnew", warnings)
    assert len([r for r in gh.log if r.method == "GET"]) == 3
    assert [r.method for r in gh.writes()] == ["POST"]
    assert len(gh.comments[7]) == 251


def test_403_from_a_fork_pr_is_a_warning(github_server):
    gh, warnings = github_server, []
    gh.forbidden = True
    assert upsert(gh, MARK + "\nx", warnings) is None
    assert warnings == [
        "could not post the PR comment: POST /repos/octo/widgets/issues/7/comments: HTTP 403 "
        "Resource not accessible by integration (a pull request from a fork gets a read-only "
        "token; see the README on workflow_run)"
    ]
    assert gh.token not in warnings[0]


def test_5xx_is_retried_then_succeeds(github_server):
    gh, warnings = github_server, []
    gh.fail_next = 2
    assert upsert(gh, MARK + "\nx", warnings, retries=3) is not None
    assert [r.method for r in gh.log] == ["GET", "GET", "GET", "POST"]
    assert warnings == []


def test_5xx_after_retries_is_a_warning(github_server):
    gh, warnings = github_server, []
    gh.fail_next = 10
    assert upsert(gh, MARK + "\nx", warnings, retries=2) is None
    assert warnings == [
        "could not post the PR comment: GET /repos/octo/widgets/issues/7/comments: HTTP 502 after 3 tries"
    ]
    assert len(gh.log) == 3


def test_missing_token_warns_without_a_request(github_server):
    gh, warnings = github_server, []
    assert upsert(gh, "x", warnings, token=None) is None
    assert warnings == [
        "no GitHub token: the PR comment was not posted (set the github-token input)"
    ]
    assert gh.log == []


def test_missing_pr_number_warns(github_server):
    warnings = []
    assert upsert(github_server, "x", warnings, number=None) is None
    assert warnings == ["no pull request found in the event payload: the PR comment was not posted"]


def test_bad_token_is_a_warning_that_does_not_echo_it(github_server):
    warnings = []
    assert upsert(github_server, "x", warnings, token="ghp_wrong_secret_value") is None
    assert warnings == [
        "could not post the PR comment: GET /repos/octo/widgets/issues/7/comments: HTTP 401 "
        "Bad credentials (the token was rejected)"
    ]


def test_unreachable_api_is_a_warning():
    warnings = []
    url = upsert_pr_comment(
        "x",
        MARK,
        token="t0ken",
        repository="o/r",
        number=1,
        api_url="http://127.0.0.1:9",
        warn=warnings.append,
        retries=1,
        backoff=0.0,
        timeout=2.0,
    )
    assert url is None
    assert warnings == [
        "could not post the PR comment: GET /repos/o/r/issues/1/comments: nothing listens on 127.0.0.1:9 "
        "(connection refused)"
    ]


def test_github_enterprise_api_prefix():
    gh = FakeGitHub(prefix="/api/v3")
    server = start(gh)
    try:
        warnings = []
        assert upsert(gh, MARK + "\nghe", warnings) is not None
        assert gh.log[-1].path == "/api/v3/repos/octo/widgets/issues/7/comments"
    finally:
        server.shutdown()
        server.server_close()


def test_token_is_never_sent_to_another_host(github_server):
    client = CommentClient(github_server.token, "octo/widgets", api_url=github_server.url)
    try:
        with pytest.raises(GitHubError, match="refusing to send the token"):
            client._request("GET", "http://127.0.0.2:1/repos/x")
    finally:
        client.close()


def test_oversized_comment_is_accepted_by_the_server(github_server):
    rows = []
    for i in range(50):
        row = data.results()[3]
        row["sample_id"] = i
        row["submission"] = {"quality": "@everyone <b>" * 20_000}
        rows.append(row)
    body = comment(rows=rows)
    warnings = []
    assert upsert(github_server, body, warnings) is not None
    assert warnings == []
    assert github_server.comments[7][0]["body"] == body


# ---------------------------------------------------------------- GitHub's rate limits


SECONDARY = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)


@pytest.mark.parametrize(
    "status,headers",
    [
        (403, {"retry-after": "1"}),
        (429, {"retry-after": "1"}),
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "{reset}"}),
        (429, {"Retry-After": "{date}"}),
    ],
)
def test_a_rate_limited_answer_is_waited_out_then_the_comment_is_posted(
    github_server, status, headers
):
    import email.utils
    import time

    gh, warnings = github_server, []
    now = time.time()
    fill = {"reset": str(int(now) + 2), "date": email.utils.formatdate(now + 2, usegmt=True)}
    gh.limited.append((status, {k: v.format(**fill) for k, v in headers.items()}, SECONDARY))
    t0 = time.monotonic()
    url = upsert(gh, MARK + "\nbody", warnings)
    assert url is not None and warnings == []
    assert time.monotonic() - t0 >= 0.9  # GitHub's wait was sat out, not skipped
    assert [c["body"] for c in gh.comments[7]] == [MARK + "\nbody"]


def test_a_long_rate_limit_is_reported_not_waited_and_gets_no_fork_hint(github_server):
    import time

    gh, warnings = github_server, []
    reset = int(time.time()) + 3600
    gh.limited.append(
        (
            403,
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
            "API rate limit exceeded for installation ID 1.",
        )
    )
    t0 = time.monotonic()
    assert upsert(gh, MARK + "\nbody", warnings) is None
    assert time.monotonic() - t0 < 2
    (warning,) = warnings
    assert warning.startswith(
        "could not post the PR comment: GET /repos/octo/widgets/issues/7/comments: "
        "rate limited by GitHub (it asks to wait "
    )
    assert warning.endswith(" s)") and "fork" not in warning
    assert int(warning.rsplit("wait ", 1)[1].split(" ")[0]) in range(3595, 3601)


def test_a_rate_limit_403_without_headers_is_told_apart_by_its_message(github_server, monkeypatch):
    import ci_evals.reports.github as gh_mod

    monkeypatch.setattr(gh_mod, "SECONDARY_LIMIT_WAIT", 0.2)  # GitHub's "a minute", shortened
    gh, warnings = github_server, []
    gh.limited.append((403, {}, SECONDARY))
    assert upsert(gh, MARK + "\nbody", warnings) is not None and warnings == []
    assert [(r.method, r.path) for r in gh.log][:2] == [
        ("GET", "/repos/octo/widgets/issues/7/comments")
    ] * 2
