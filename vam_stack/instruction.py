"""What counts as a language instruction, checked the same way wherever one enters (the policy's
`reset`, the policy node's runtime, the CLI): a string with at least one visible character
(a letter, digit, punctuation mark or symbol: zero-width and format characters, spaces and
control characters alone embed like the empty prompt, an episode with no task) and at most
`MAX_INSTRUCTION_CHARS` characters (an instruction is a sentence; a megabyte of text is a
mistake that would be logged and cached whole)."""
from __future__ import annotations

import unicodedata

MAX_INSTRUCTION_CHARS = 2000


def visible(text: str) -> bool:
    """Whether `text` has a character a reader would see."""
    return any(unicodedata.category(ch)[0] in "LNPS" for ch in text)


def check_instruction(text: object) -> str:
    """`text` unchanged, or ValueError saying what is wrong with it (quoted, cut to 80 characters)."""
    if not isinstance(text, str):
        raise ValueError(f"instruction must be a string, got {type(text).__name__} {shorten(repr(text))}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:   # a lone surrogate: no text encoder (nor a ROS string) can carry it
        raise ValueError(f"instruction is not valid Unicode text: {text[e.start]!r} at character {e.start} is a lone "
                         f"surrogate: {shorten(text.encode('unicode_escape').decode('ascii'))!r}") from None
    if len(text) > MAX_INSTRUCTION_CHARS:
        raise ValueError(f"instruction has {len(text)} characters, more than {MAX_INSTRUCTION_CHARS}: "
                         f"{shorten(repr(text))}")
    if not visible(text):
        raise ValueError(f"instruction has no visible character (only spaces, zero-width, format or control "
                         f"characters): {shorten(text.encode('unicode_escape').decode('ascii'))!r}")
    return text


def shorten(text: str, limit: int = 80) -> str:
    """`text` cut to `limit` characters with the cut said, for log lines and errors."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
