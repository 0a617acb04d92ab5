"""The report opens in a real browser: headless Chromium (Debian's `chromium`, installed by
tools/install-report-tools.sh, which `make test` runs) loads report.html and every inlined figure decodes and is laid
out on the page."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from loaderbench.analysis.figures.draw_all import run
from loaderbench.fake_records.studies import study_cells, study_records, write_records

#: Appended to a copy of the page: once it has loaded, draw every image onto a canvas (it must have pixels that are
#: not blank) and write what each one gave into the page's title, which --dump-dom prints.
CHECK = """<script>
window.addEventListener("load", () => {
  const out = [];
  for (const img of document.images) {
    let ok = img.complete && img.naturalWidth > 0 ? "ok" : "undecodable";
    if (ok === "ok") {  // decoded for real: drawn onto a canvas, its pixels are not all blank
      const c = document.createElement("canvas");
      c.width = img.naturalWidth; c.height = img.naturalHeight;
      const ctx = c.getContext("2d");
      ctx.drawImage(img, 0, 0);
      const px = ctx.getImageData(0, 0, c.width, c.height).data;
      let inked = 0;
      for (let i = 0; i < px.length; i += 4 * 97) if (px[i + 3] > 0 && (px[i] < 250 || px[i + 1] < 250)) inked++;
      if (inked === 0) ok = "blank";
    }
    const box = img.getBoundingClientRect();
    const size = [img.naturalWidth, img.naturalHeight, Math.round(box.width), Math.round(box.height)];
    out.push([img.alt, ok, ...size].join(":"));
  }
  document.title = "CHECKED " + document.images.length + " " + out.join(" ");
});
</script>"""


WINDOW = (1280, 900)


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if os.geteuid() == 0:  # `make test` installs it: its absence is a failure
        pytest.fail("chromium is not installed: run tools/install-report-tools.sh (make test does)")
    pytest.skip("chromium is not installed and installing it needs root: run tools/install-report-tools.sh")


def test_every_figure_of_the_report_decodes_and_renders_in_chromium(tmp_path):
    browser = chromium()
    root, out = tmp_path / "r", tmp_path / "f"
    cells = study_cells(
        workloads=(("cpu", None), ("jpeg", "pil")), cores=(1, 2), n_sweep=(0, 1, 2, 4), start_methods=("fork",)
    )
    for study in ("one", "two"):
        write_records(root, study_records(study, cells, repetitions=3, raw=False, random_failures=False))
    code, _, report = run(root, out, jobs=1, quiet=True)
    assert code == 0
    page = report[0].read_text()
    inlined = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(inlined) >= 8 and len(set(inlined)) == len(inlined), "a figure is inlined twice"
    checked = tmp_path / "checked.html"
    checked.write_text(page.replace("</body>", CHECK + "</body>"))
    proc = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            # nothing but the page: no network of its own (this machine refuses it), no crash handler left running
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-breakpad",
            "--disable-crash-reporter",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=30000",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            "--dump-dom",
            checked.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    title = re.search(r"<title>(.*?)</title>", proc.stdout, re.S)
    assert title and title.group(1).startswith("CHECKED"), f"the page did not finish loading: {proc.stderr[-2000:]}"
    _, count, *images = title.group(1).split(" ")
    assert int(count) == len(inlined) == len(images)
    for image in images:
        alt, ok, nw, nh, w, h = image.split(":")
        assert ok == "ok" and int(nw) > 0 and int(nh) > 0, f"{alt}: does not decode ({image})"
        assert int(w) > 0 and int(h) > 0, f"{alt}: decoded but not laid out on the page ({image})"
        assert int(w) <= WINDOW[0], f"{alt}: wider than the window ({image})"
