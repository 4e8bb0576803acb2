"""The GitHub Action mode: the image's entrypoint, its inputs and outputs, and the token handover."""
