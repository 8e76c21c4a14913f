"""The Roder adapter with a scripted model inside the task container, for
the offline Harbor trial test (crates/roder-cli/tests/harbor_trial_e2e.rs):
install() also starts fake_model.py on 127.0.0.1:8765; select it with
``-a fake_model_agent:RoderWithFakeModel --ak base_url=http://127.0.0.1:8765/v1``.
"""

from pathlib import Path

from roder_harbor import INSTALL_DIR, Roder

from harbor.environments.base import BaseEnvironment

HERE = Path(__file__).resolve().parent
PORT = 8765


class RoderWithFakeModel(Roder):
    @staticmethod
    def name() -> str:
        return "roder-fake-model"

    async def install(self, environment: BaseEnvironment) -> None:
        await super().install(environment)
        await environment.upload_file(HERE / "fake_model.py", f"{INSTALL_DIR}/fake_model.py")
        await self.exec_as_root(
            environment,
            f"nohup python3 {INSTALL_DIR}/fake_model.py {PORT} > /logs/agent/fake-model.log 2>&1 &",
        )
        # Up before run(): a connect succeeds within 10 s, or install fails.
        probe = (
            "import socket, time\n"
            "for _ in range(100):\n"
            "    try:\n"
            f"        socket.create_connection(('127.0.0.1', {PORT}), 0.1).close(); break\n"
            "    except OSError: time.sleep(0.1)\n"
            "else: raise SystemExit('the fake model did not start')\n"
        )
        await self.exec_as_root(environment, f"python3 -c {__import__('shlex').quote(probe)}")
