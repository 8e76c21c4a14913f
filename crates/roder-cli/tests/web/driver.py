"""A Chromium driven by Selenium, taking one command per line on stdin and
answering one JSON line per command on stdout, so a Rust test (or the bench)
can script a real browser step by step while it drives the server and the
fake model itself.

Commands: {"op": "get", "url"}, {"op": "wait", "css", "text"?, "count"?,
"timeout"?}, {"op": "wait_js", "script", "timeout"?}, {"op": "click", "css",
"text"?}, {"op": "type", "css", "text"}, {"op": "js", "script"},
{"op": "screenshot", "path"}, {"op": "quit"}. Answers: {"ok": true,
"value": ...} or {"ok": false, "error": "..."}.
"""

import json
import os
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,900",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(argument)
    service = Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    return webdriver.Chrome(options=options, service=service)


def matching(driver, css, text):
    elements = driver.find_elements(By.CSS_SELECTOR, css)
    if text is None:
        return elements
    return [element for element in elements if text in element.text]


def poll(timeout, probe, what):
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        try:
            value = probe()
            if value:
                return value
        except Exception as error:  # a stale element while the page changes
            last_error = error
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout} s" + (f" (last error: {last_error})" if last_error else ""))
        time.sleep(0.02)


def run(driver, command):
    op = command["op"]
    timeout = command.get("timeout", 20)
    if op == "get":
        driver.get(command["url"])
        return None
    if op == "wait":
        count = command.get("count", 1)
        css, text = command["css"], command.get("text")

        def probe():
            # Texts read inside the probe: the page re-renders parts of
            # itself, and an element read later may be gone.
            texts = [element.text for element in matching(driver, css, text)]
            return texts if len(texts) >= count else None

        return poll(timeout, probe, f"no {count} of {css!r}" + (f" with {text!r}" if text else ""))
    if op == "wait_js":
        return poll(timeout, lambda: driver.execute_script(command["script"]), f"{command['script']!r} stayed falsy")
    if op == "click":
        css, text = command["css"], command.get("text")
        element = poll(timeout, lambda: next(iter(matching(driver, css, text)), None), f"nothing to click at {css!r}")
        element.click()
        return None
    if op == "type":
        element = poll(timeout, lambda: next(iter(matching(driver, command["css"], None)), None), "no input")
        element.clear()
        element.send_keys(command["text"])
        return None
    if op == "js":
        return driver.execute_script(command["script"])
    if op == "screenshot":
        driver.save_screenshot(command["path"])
        return command["path"]
    raise ValueError(f"unknown op {op!r}")


def main():
    driver = browser()
    print(json.dumps({"ok": True, "value": "ready"}), flush=True)
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            command = json.loads(line)
            if command["op"] == "quit":
                break
            try:
                answer = {"ok": True, "value": run(driver, command)}
            except Exception as error:
                answer = {"ok": False, "error": f"{type(error).__name__}: {error}"}
            print(json.dumps(answer, default=str), flush=True)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
