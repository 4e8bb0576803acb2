"""The token handover: which variables user code loses, and the pipe the token travels through."""

from __future__ import annotations

import os

import pytest

from ci_evals.action.handover import TOKEN_FD, HandoverError, hidden_names, take_token


def test_hidden_names_are_the_inputs_copies_of_the_token_and_runner_tokens():
    env = {
        "INPUT_GITHUB-TOKEN": "ghs_abc123",
        "GITHUB_TOKEN": "ghs_abc123",
        "MY_COPY": " ghs_abc123\n",
        "ACTIONS_RUNTIME_TOKEN": "rt",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc",
        "OPENAI_API_KEY": "sk-x",
        "PATH": "/bin",
    }
    assert hidden_names(env) == [
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
        "ACTIONS_RUNTIME_TOKEN",
        "GITHUB_TOKEN",
        "INPUT_GITHUB-TOKEN",
        "MY_COPY",
    ]


def test_no_token_nothing_hidden_but_the_empty_input():
    assert hidden_names({"PATH": "/bin"}) == []
    assert hidden_names({"PATH": "/bin", "INPUT_GITHUB-TOKEN": "  ", "EMPTY": " "}) == [
        "INPUT_GITHUB-TOKEN"
    ]


def test_take_token_reads_the_pipe_closes_it_and_drops_the_variable():
    read_end, write_end = os.pipe()
    os.write(write_end, b"ghs_handed_over\n")
    os.close(write_end)
    env = {TOKEN_FD: str(read_end)}
    assert take_token(env) == "ghs_handed_over"
    assert env == {}
    with pytest.raises(OSError):
        os.fstat(read_end)


def test_take_token_without_handover_is_none():
    assert take_token({}) is None


@pytest.mark.parametrize("raw", ["x", "-1", "٣"])
def test_take_token_rejects_a_variable_that_is_not_a_descriptor(raw):
    with pytest.raises(HandoverError, match=f"{TOKEN_FD} must be a file descriptor number"):
        take_token({TOKEN_FD: raw})
