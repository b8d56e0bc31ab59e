"""ringleader: one command becomes a gang of distributed-training ranks.

The launcher (``ringleader.launch``) starts ranks on this machine or over
SSH; the runtime helper (``ringleader.runtime``) is what training code
imports.  Nothing here imports torch: the launcher must start fast.
"""

__version__ = "0.1.0"
