/**
 * Renders the README's pictures from a real storm run: the HTML report in Debian's headless
 * Chromium at 1280 px: the page's top (docs/storm-report.png) and one screenshot per
 * scenario section. `node scripts/screenshots.ts [seed]`.
 */
import { writeFile } from "node:fs/promises";
import { pathToFileURL } from "node:url";
import { chromium } from "playwright-core";
import { htmlReport, runStorm } from "../src/storm/index.ts";

const seed = Number(process.argv[2] ?? 1);
const scenarios = ["outage-503", "metastable", "fan-out"];
const report = await runStorm({ seed, scenarios: [...scenarios, "rate-limit"] });
const file = "artifacts/screenshots.html";
await writeFile(file, htmlReport(report));
const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(pathToFileURL(file).href);
  await page.screenshot({ path: "docs/storm-report.png" });
  for (const name of scenarios) {
    await page.locator(`section#${name}`).screenshot({ path: `docs/storm-${name}.png` });
    console.log(`docs/storm-${name}.png`);
  }
} finally {
  await browser.close();
}
