"""Letta: one client and its retries (``client``), the agents a run creates (``agents``), and
Letta messages read into the normalized trajectory (``messages``); shared by the Letta target and
the agent-as-judge grader."""
