"""The verify venv: a fresh virtual environment holding exactly a target's built wheels.

- ``install.py``: the built wheels of a target (from its manifest), the venv, pip installs and
  the proof that every installed file is the built wheel's (sha256, RECORD);
- ``consumer.py``: the venv made with the consumer's own commands (README's install section);
- ``venv.py``: the venv made or repaired for a verification, and the inputs it was made from;
- ``installed.py``: the install check for targets whose stack cannot run extraction on CPU.
"""

__all__: list[str] = []
