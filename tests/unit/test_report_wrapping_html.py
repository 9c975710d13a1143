"""Report tables mark long tokens (paths, ids) as the only text that may break inside
itself (``span.tok``); words and numbers are left whole. The browser check of the
rendered tables is tests/integration/test_report_wrapping.py."""

from __future__ import annotations

import pytest

from ssdlab.report.html import LONG_TOKEN_CHARS, kv_table, table


@pytest.mark.parametrize("text", [
    "/dev/disk/by-id/nvme-Samsung_SSD_980_PRO_1TB",
    "p99_9_write_latency_ms_max",
    "rate=1117686989,479018189",
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
])
def test_a_long_token_may_break(text: str) -> None:
    assert table(("x",), [[text]]) == (
        '<table><thead><tr><th>x</th></tr></thead><tbody>'
        f'<tr><td><span class="tok">{text}</span></td></tr></tbody></table>')


@pytest.mark.parametrize("text", [
    "verdict", "fitted line (min-max % of avg)", "1,099,511,627,776,000,000,000",
    "Pneumonoultramicroscopicsilicovolcanoconiosis", "fresh-out-of-the-box-state-of-a-drive",
    "20261124-215600-f82a", "iops_bs4096_r100", "Debian GNU/Linux 12 (bookworm)",
])
def test_words_numbers_and_short_tokens_stay_whole(text: str) -> None:
    assert "tok" not in table((text,), [[text]])


def test_only_text_is_marked_never_tags_or_svg() -> None:
    path = "/work/some/very/long/directory/results.sqlite"
    link = f'<a href="#{"x" * 40}">{path}</a> &amp; more'
    assert table(("",), [[link]]).count('<span class="tok">') == 1
    assert f'href="#{"x" * 40}"' in table(("",), [[link]])
    svg = f'<svg class="spark"><text>{path}</text></svg>'
    assert svg in table(("",), [[svg]])
    # an escaped character is never cut: the whole token is in one span
    assert kv_table([("k", "<" * LONG_TOKEN_CHARS)]).endswith(
        f'<td><span class="tok">{"&lt;" * LONG_TOKEN_CHARS}</span></td></tr></tbody></table>')
