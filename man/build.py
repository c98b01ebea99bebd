"""Assemble man/evtime-adjust.1 and man/evtime-explain.1 from man/src (a page's own head,
the shared option sections it needs, its tail).  Run: python man/build.py"""

from pathlib import Path

HERE = Path(__file__).parent
PAGES = {  # page -> the shared option sections it includes
    "evtime-adjust": ["input-options", "output-options", "state-options", "spark-options"],
    "evtime-explain": ["input-options", "spark-options"],
}


# pages that carry the shared ENVIRONMENT and FILES sections between these markers
SHARED = [
    "evtime",
    "evtime-adjust",
    "evtime-explain",
    "evtime-merge",
    "evtime-bound",
    "evtime-sweep",
]
BEGIN = '.\\" shared: environment and files (man/src/environment.roff; python man/build.py)\n'
END = '.\\" end of shared environment and files\n'


def shared(text: str) -> str:
    """``text`` with the shared block between the markers made current."""
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return head + BEGIN + (HERE / "src" / "environment.roff").read_text() + END + tail


def build(name: str) -> str:
    if name not in PAGES:  # hand-written: only the shared block is built
        return shared((HERE / f"{name}.1").read_text())
    src = HERE / "src"
    parts = [f"{name}.head", *(f"{s}.roff" for s in PAGES[name]), f"{name}.tail"]
    return shared("".join((src / p).read_text() for p in parts))


if __name__ == "__main__":
    for page in sorted({*PAGES, *SHARED}):
        (HERE / f"{page}.1").write_text(build(page))
