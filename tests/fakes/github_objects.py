"""The objects the fake GitHub (``tests/fakes/github_server.py``) answers with, shaped as GitHub's
REST API sends them: every field its OpenAPI description requires (tests/test_supply_github.py
validates them against tests/data/github_openapi.json, strictly: no field it does not define).
"""

from __future__ import annotations

import hashlib
from typing import Any

WEB = "https://github.example"
"""Not github.com: the fake is no GitHub (tests assert the comment URL it gives)."""
API = "https://api.github.example"
CREATED = "2026-01-05T09:30:00Z"
UPDATED = "2026-01-05T09:31:00Z"
DOCS = "https://docs.github.com/rest"


def _id(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def user(login: str, kind: str = "User") -> dict[str, Any]:
    """A ``simple-user``: a comment's author, a pull request's user."""
    url = f"{API}/users/{login}"
    return {
        "login": login,
        "id": _id(login),
        "node_id": f"U_{_id(login):x}",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{_id(login)}?v=4",
        "gravatar_id": "",
        "url": url,
        "html_url": f"{WEB}/{login}",
        "followers_url": f"{url}/followers",
        "following_url": f"{url}/following{{/other_user}}",
        "gists_url": f"{url}/gists{{/gist_id}}",
        "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{url}/subscriptions",
        "organizations_url": f"{url}/orgs",
        "repos_url": f"{url}/repos",
        "events_url": f"{url}/events{{/privacy}}",
        "received_events_url": f"{url}/received_events",
        "type": kind,
        "user_view_type": "public",
        "site_admin": False,
    }


def authenticated_user(login: str) -> dict[str, Any]:
    """``GET /user`` for a personal token (the ``public-user`` view)."""
    return {
        **user(login),
        "name": None,
        "company": None,
        "blog": "",
        "location": None,
        "email": None,
        "hireable": None,
        "bio": None,
        "twitter_username": None,
        "public_repos": 3,
        "public_gists": 0,
        "followers": 1,
        "following": 0,
        "created_at": CREATED,
        "updated_at": UPDATED,
    }


def comment(
    repo: str, number: int, comment_id: int, body: str, author: dict[str, Any]
) -> dict[str, Any]:
    """An ``issue-comment`` on issue/PR ``number`` of ``repo``."""
    return {
        "id": comment_id,
        "node_id": f"IC_{comment_id:x}",
        "url": f"{API}/repos/{repo}/issues/comments/{comment_id}",
        "html_url": f"{WEB}/{repo}/pull/{number}#issuecomment-{comment_id}",
        "body": body,
        "user": author,
        "created_at": CREATED,
        "updated_at": CREATED,
        "issue_url": f"{API}/repos/{repo}/issues/{number}",
        "author_association": "NONE" if author.get("type") == "Bot" else "OWNER",
        "performed_via_github_app": None,
    }


def repository(full_name: str) -> dict[str, Any]:
    """A ``repository`` (a pull request's head and base repo)."""
    owner, name = full_name.split("/")
    url, web = f"{API}/repos/{full_name}", f"{WEB}/{full_name}"
    templated = {
        "archive_url": "/{archive_format}{/ref}",
        "assignees_url": "/assignees{/user}",
        "blobs_url": "/git/blobs{/sha}",
        "branches_url": "/branches{/branch}",
        "collaborators_url": "/collaborators{/collaborator}",
        "comments_url": "/comments{/number}",
        "commits_url": "/commits{/sha}",
        "compare_url": "/compare/{base}...{head}",
        "contents_url": "/contents/{+path}",
        "git_commits_url": "/git/commits{/sha}",
        "git_refs_url": "/git/refs{/sha}",
        "git_tags_url": "/git/tags{/sha}",
        "issue_comment_url": "/issues/comments{/number}",
        "issue_events_url": "/issues/events{/number}",
        "issues_url": "/issues{/number}",
        "keys_url": "/keys{/key_id}",
        "labels_url": "/labels{/name}",
        "milestones_url": "/milestones{/number}",
        "notifications_url": "/notifications{?since,all,participating}",
        "pulls_url": "/pulls{/number}",
        "releases_url": "/releases{/id}",
        "statuses_url": "/statuses/{sha}",
        "trees_url": "/git/trees{/sha}",
    }
    plain = [
        "contributors",
        "deployments",
        "downloads",
        "events",
        "forks",
        "hooks",
        "languages",
        "merges",
        "stargazers",
        "subscribers",
        "subscription",
        "tags",
        "teams",
    ]
    return {
        "id": _id(full_name),
        "node_id": f"R_{_id(full_name):x}",
        "name": name,
        "full_name": full_name,
        "owner": user(owner, "Organization"),
        "private": False,
        "html_url": web,
        "description": None,
        "fork": False,
        "url": url,
        **{key: url + tail for key, tail in templated.items()},
        **{f"{key}_url": f"{url}/{key}" for key in plain},
        "git_url": f"git://github.example/{full_name}.git",
        "ssh_url": f"git@github.example:{full_name}.git",
        "clone_url": f"{web}.git",
        "svn_url": web,
        "mirror_url": None,
        "homepage": None,
        "language": "Python",
        "license": None,
        "forks": 0,
        "forks_count": 0,
        "stargazers_count": 0,
        "watchers": 0,
        "watchers_count": 0,
        "size": 120,
        "default_branch": "main",
        "open_issues": 1,
        "open_issues_count": 1,
        "has_issues": True,
        "has_projects": True,
        "has_wiki": True,
        "has_pages": False,
        "has_downloads": True,
        "archived": False,
        "disabled": False,
        "visibility": "public",
        "pushed_at": UPDATED,
        "created_at": CREATED,
        "updated_at": UPDATED,
    }


def pull(repo: str, number: int, head_sha: str) -> dict[str, Any]:
    """A ``pull-request`` (``GET /repos/{repo}/pulls/{number}``), open, from a branch of ``repo``."""
    url, web = f"{API}/repos/{repo}/pulls/{number}", f"{WEB}/{repo}/pull/{number}"
    issue = f"{API}/repos/{repo}/issues/{number}"
    author = user("octocat")
    links = {
        "self": url,
        "html": web,
        "issue": issue,
        "comments": f"{issue}/comments",
        "review_comments": f"{url}/comments",
        "review_comment": f"{API}/repos/{repo}/pulls/comments{{/number}}",
        "commits": f"{url}/commits",
        "statuses": f"{API}/repos/{repo}/statuses/{head_sha}",
    }
    side = {"ref": "main", "sha": "0" * 40}
    return {
        "url": url,
        "id": _id(f"{repo}#{number}"),
        "node_id": f"PR_{_id(f'{repo}#{number}'):x}",
        "html_url": web,
        "diff_url": f"{web}.diff",
        "patch_url": f"{web}.patch",
        "issue_url": issue,
        "commits_url": links["commits"],
        "review_comments_url": links["review_comments"],
        "review_comment_url": links["review_comment"],
        "comments_url": links["comments"],
        "statuses_url": links["statuses"],
        "number": number,
        "state": "open",
        "locked": False,
        "title": "Tune the prompt",
        "user": author,
        "body": None,
        "labels": [],
        "milestone": None,
        "active_lock_reason": None,
        "created_at": CREATED,
        "updated_at": UPDATED,
        "closed_at": None,
        "merged_at": None,
        "merge_commit_sha": None,
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "head": {
            "label": "octocat:tune-prompt",
            "ref": "tune-prompt",
            "sha": head_sha,
            "user": author,
            "repo": repository(repo),
        },
        "base": {
            "label": f"{repo.split('/')[0]}:main",
            **side,
            "user": user(repo.split("/")[0], "Organization"),
            "repo": repository(repo),
        },
        "_links": {key: {"href": href} for key, href in links.items()},
        "author_association": "CONTRIBUTOR",
        "auto_merge": None,
        "draft": False,
        "merged": False,
        "mergeable": True,
        "rebaseable": True,
        "mergeable_state": "clean",
        "merged_by": None,
        "comments": 1,
        "review_comments": 0,
        "maintainer_can_modify": False,
        "commits": 1,
        "additions": 3,
        "deletions": 1,
        "changed_files": 1,
    }


def error(status: int, message: str) -> dict[str, Any]:
    """A ``basic-error`` (403, 404, 401, 5xx bodies)."""
    return {"message": message, "documentation_url": DOCS, "status": str(status)}


def validation_error(field: str, problem: str) -> dict[str, Any]:
    """A ``validation-error`` (422) of an issue comment's ``field``."""
    return {
        "message": "Validation Failed",
        "errors": [
            {"resource": "IssueComment", "code": "custom", "field": field, "message": problem}
        ],
        "documentation_url": DOCS,
    }
