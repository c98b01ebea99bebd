"""Assemble man/evtime-adjust.1 and man/evtime-explain.1 from man/src (a page's own head,
the options every command shares, its tail).  Run: python man/build.py"""

from pathlib import Path

HERE = Path(__file__).parent
PAGES = ["evtime-adjust", "evtime-explain"]


def build(name: str) -> str:
    src = HERE / "src"
    parts = [src / f"{name}.head", src / "common-options.roff", src / f"{name}.tail"]
    return "".join(p.read_text() for p in parts)


if __name__ == "__main__":
    for page in PAGES:
        (HERE / f"{page}.1").write_text(build(page))
