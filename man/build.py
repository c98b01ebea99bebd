"""Assemble man/evtime-adjust.1 and man/evtime-explain.1 from man/src (a page's own head,
the shared option sections it needs, its tail).  Run: python man/build.py"""

from pathlib import Path

HERE = Path(__file__).parent
PAGES = {  # page -> the shared option sections it includes
    "evtime-adjust": ["input-options", "output-options", "state-options", "spark-options"],
    "evtime-explain": ["input-options", "spark-options"],
}


def build(name: str) -> str:
    src = HERE / "src"
    parts = [f"{name}.head", *(f"{s}.roff" for s in PAGES[name]), f"{name}.tail"]
    return "".join((src / p).read_text() for p in parts)


if __name__ == "__main__":
    for page in PAGES:
        (HERE / f"{page}.1").write_text(build(page))
