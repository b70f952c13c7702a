import { existsSync } from "node:fs";
import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { chromium } from "playwright-core";
import { describe, expect, it } from "vitest";
import { htmlReport } from "../../src/storm/report-html.ts";
import { GROUPS } from "../../src/storm/report-text.ts";
import { STACKS } from "../../src/storm/stacks.ts";
import { runStorm } from "../../src/storm/storm.ts";

const CHROMIUM = "/usr/bin/chromium";

describe("the HTML report in real headless Chromium", () => {
  it("loads offline at 1280 px: a legend, every line drawn or named, every column explained, no table overflowing, no error; keeps a screenshot", async () => {
    // .ci/run installs Debian's chromium; without it this test cannot run and must say so.
    expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install chromium`).toBe(true);
    const report = await runStorm({ scenarios: ["blip", "tool-deploy"] });
    const dir = await mkdtemp(join(tmpdir(), "bw-report-"));
    const file = join(dir, "storm-report.html");
    await writeFile(file, htmlReport(report));

    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      const problems: string[] = [];
      const requests: string[] = [];
      page.on("console", (m) => {
        if (m.type() === "error" || m.type() === "warning") problems.push(m.text());
      });
      page.on("pageerror", (e) => problems.push(e.message));
      page.on("request", (r) => requests.push(r.url()));
      await page.route(/^(?!file:)/, (route) => route.abort()); // offline: nothing but the file
      await page.goto(pathToFileURL(file).href, { waitUntil: "load" });

      const charts = await page.$$eval("svg.chart", (svgs) =>
        svgs.map((svg) => {
          const box = svg.getBoundingClientRect();
          const lines = [...svg.querySelectorAll("polyline.series")].map((p) => ({
            stacks: (p.getAttribute("data-stacks") ?? "").split(","),
            points: (p as SVGPolylineElement).points.length,
            width: (p as SVGPolylineElement).getBBox().width,
            height: (p as SVGPolylineElement).getBBox().height,
          }));
          const caption = svg.parentElement?.querySelector("figcaption")?.textContent ?? "";
          const title = svg.getAttribute("aria-label") ?? "";
          return { w: box.width, h: box.height, lines, caption, title };
        }),
      );
      // Per scenario: requests, goodput and whole turns answered within T; and the tool
      // dependency's requests.
      expect(charts).toHaveLength(3 + 4);
      expect(charts.filter((c) => c.title.startsWith("first turns"))).toHaveLength(2);
      const names = STACKS.map((s) => s.name);
      for (const c of charts) {
        expect(c.w).toBeGreaterThan(300);
        // Every stack is drawn: by its own line, or named on the line it lies under.
        expect(c.lines.flatMap((l) => l.stacks).sort()).toEqual([...names].sort());
        for (const l of c.lines) {
          // A second of the run a point; a turn chart, a second of patience (0 to 90 s).
          if (c.title.startsWith("first turns")) expect(l.points).toBe(91);
          else expect(l.points).toBeGreaterThanOrEqual(180);
          expect(l.width).toBeGreaterThan(300);
          expect(l.height).toBeGreaterThan(5); // a line with data, not flat at zero
          // A line that stands for several stacks says so under the chart.
          if (l.stacks.length > 1) expect(c.caption).toContain(l.stacks.join(" = "));
        }
        if (c.lines.length === names.length) expect(c.caption).toBe("Every stack's line is apart.");
      }
      // A legend per scenario, naming every stack with its line's style.
      const legends = await page.$$eval("ul.legend", (uls) =>
        uls.map((ul) => [...ul.querySelectorAll("li")].map((li) => li.textContent ?? "")),
      );
      expect(legends).toEqual([names, names]);
      // Every column explained: in the key, and on its title.
      const key = await page.$$eval(".key dt", (dts) => dts.map((d) => d.textContent ?? ""));
      const heads = await page.$$eval("table thead th", (ths) =>
        ths.map((th) => ({ text: th.textContent ?? "", help: th.getAttribute("title") ?? "" })),
      );
      for (const h of heads) {
        expect(key).toContain(h.text);
        expect(h.help.length, h.text).toBeGreaterThan(20);
      }
      // No table wider than the page at 1280 px (the tool scenario's has 16 columns).
      const widths = await page.$$eval("table", (ts) =>
        ts.map((t) => ({ table: t.scrollWidth, room: t.parentElement!.clientWidth })),
      );
      for (const w of widths) expect(w.table).toBeLessThanOrEqual(w.room);
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(
        1280,
      );
      const rows = await page.$$eval("table tbody tr:not(.group)", (trs) =>
        trs.map((tr) => tr.textContent ?? ""),
      );
      expect(rows).toHaveLength(4 * STACKS.length); // per call and whole turns, each scenario
      expect(rows.some((r) => r.startsWith("breakwater"))).toBe(true);
      // The rows with a second provider, then those inside a durable engine, come last, each
      // under its own heading: like with like.
      const tables = await page.$$eval("table tbody", (bodies) =>
        bodies.map((b) =>
          [...b.querySelectorAll("tr")].map((tr) =>
            tr.classList.contains("group") ? "|" : (tr.querySelector("td")?.textContent ?? ""),
          ),
        ),
      );
      const single = STACKS.filter((st) => !st.fallback && !st.engine).map((st) => st.name);
      const fallbacks = STACKS.filter((st) => st.fallback).map((st) => st.name);
      const engines = STACKS.filter((st) => st.engine).map((st) => st.name);
      for (const t of tables) expect(t).toEqual([...single, "|", ...fallbacks, "|", ...engines]);
      expect(await page.$$eval("tr.group", (g) => g.map((x) => x.textContent))).toEqual(
        Array(4).fill([GROUPS.fallback, GROUPS.engine]).flat(),
      );
      // Every stack's line has a style of its own (colour and dash).
      const styles = await page.$$eval("ul.legend", (uls) =>
        [...uls[0]!.querySelectorAll("line")].map(
          (l) => `${l.getAttribute("stroke")} ${l.getAttribute("stroke-dasharray")}`,
        ),
      );
      expect(new Set(styles).size).toBe(STACKS.length);
      expect(problems).toEqual([]);
      expect(requests.every((u) => u.startsWith("file:"))).toBe(true);

      await mkdir("artifacts", { recursive: true });
      await page.screenshot({ path: "artifacts/storm-report.png", fullPage: true });
      expect(existsSync("artifacts/storm-report.png")).toBe(true);
    } finally {
      await browser.close();
    }
  }, 120_000);
});
