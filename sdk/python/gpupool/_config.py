"""Where the SDK finds its endpoint and keys when they are not passed to Client(), in this order
(the CLI's order, src/cli/config.cc, plus the file a new pool writes):

1. GPUPOOL_ENDPOINT, GPUPOOL_ACCESS_KEY and GPUPOOL_SECRET_KEY in the environment;
2. a profile of the CLI's config file (`gpupool login`): GPUPOOL_CONFIG, else
   $XDG_CONFIG_HOME/gpupool/config, else ~/.config/gpupool/config; the profile GPUPOOL_PROFILE or
   "default";
3. credentials.env of the local pool's data directory (what `gpupool up` writes at its first
   start): $GPUPOOL_DATA_DIR, else /var/lib/gpupool as root, else ~/.local/share/gpupool.

Each field is taken from the first place that has it; an access key is only ever paired with the
secret key from the same place, and the CA file that https certificates are verified against
(GPUPOOL_CA_FILE in the environment and credentials.env, a profile's `ca_file`) comes from the
place the endpoint came from, because a CA belongs to its endpoint: a profile's endpoint is never
checked against the CA of a local pool's credentials.env. An endpoint passed to Client() goes
with GPUPOOL_CA_FILE from the environment, if set. None: the system's certificate store. (Inside
a task the agent passes the CA's text as GPUPOOL_CA_PEM, which Client.for_task and Monitor use.)
"""

import dataclasses
import os
from typing import Dict, List, Optional

from .errors import ConfigError

ENDPOINT_ENV = "GPUPOOL_ENDPOINT"
ACCESS_KEY_ENV = "GPUPOOL_ACCESS_KEY"
SECRET_KEY_ENV = "GPUPOOL_SECRET_KEY"
CA_FILE_ENV = "GPUPOOL_CA_FILE"
CA_PEM_ENV = "GPUPOOL_CA_PEM"  # the CA's text, which the agent gives a task (Client.for_task)
PROFILE_ENV = "GPUPOOL_PROFILE"
CONFIG_ENV = "GPUPOOL_CONFIG"
DATA_DIR_ENV = "GPUPOOL_DATA_DIR"


@dataclasses.dataclass
class Settings:
    endpoint: str = ""
    access_key: str = ""
    secret_key: str = ""
    source: str = ""  # where the keys came from, for messages
    ca_file: str = ""  # PEM CA for https; "" is the system's certificate store
    ca_source: str = ""  # where ca_file came from, for messages


def config_path(env) -> Optional[str]:
    if env.get(CONFIG_ENV):
        return env[CONFIG_ENV]
    xdg = env.get("XDG_CONFIG_HOME", "")
    if xdg.startswith("/"):
        return os.path.join(xdg, "gpupool", "config")
    if env.get("HOME"):
        return os.path.join(env["HOME"], ".config", "gpupool", "config")
    return None


def parse_config(text: str, path: str) -> Dict[str, Dict[str, str]]:
    """The CLI's profile file: [name] sections of endpoint / access_key / secret_key / ca_file
    lines."""
    profiles: Dict[str, Dict[str, str]] = {}
    section = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        where = f"{path}:{number}: "
        if line.startswith("["):
            if not line.endswith("]"):
                raise ConfigError(where + "a section must look like [name]")
            section = line[1:-1].strip()
            profiles[section] = {}
            continue
        key, eq, value = line.partition("=")
        if not eq:
            raise ConfigError(where + f"expected 'key = value' or '[profile]', got '{line}'")
        if section is None:
            raise ConfigError(where + f"'{key.strip()}' is outside a [profile] section")
        profiles[section][key.strip()] = value.strip()
    return profiles


def parse_env_file(text: str) -> Dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if eq:
            out[key.strip()] = value.strip()
    return out


def default_data_dir(env) -> str:
    if env.get(DATA_DIR_ENV):
        return env[DATA_DIR_ENV]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return "/var/lib/gpupool"
    return os.path.join(env.get("HOME") or ".", ".local", "share", "gpupool")


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from e


@dataclasses.dataclass
class _Place:
    endpoint: str
    access_key: str
    secret_key: str
    source: str
    ca_file: str
    ca_source: str


def _candidates(env, profile: Optional[str]) -> List[_Place]:
    """What each place holds, in order."""
    out = [_Place(env.get(ENDPOINT_ENV, ""), env.get(ACCESS_KEY_ENV, ""),
                  env.get(SECRET_KEY_ENV, ""), "the environment", env.get(CA_FILE_ENV, ""),
                  f"{CA_FILE_ENV} in the environment")]
    if bool(env.get(ACCESS_KEY_ENV)) != bool(env.get(SECRET_KEY_ENV)):
        have, lack = ((ACCESS_KEY_ENV, SECRET_KEY_ENV) if env.get(ACCESS_KEY_ENV)
                      else (SECRET_KEY_ENV, ACCESS_KEY_ENV))
        raise ConfigError(f"{have} is set but {lack} is not: set both, or neither")
    path = config_path(env)
    name = profile or env.get(PROFILE_ENV) or "default"
    text = _read(path) if path else None
    profiles = parse_config(text, path) if text is not None else {}
    if name in profiles:
        p = profiles[name]
        out.append(_Place(p.get("endpoint", ""), p.get("access_key", ""),
                          p.get("secret_key", ""), f"profile '{name}' of {path}",
                          p.get("ca_file", ""), f"ca_file of profile '{name}' of {path}"))
    elif profile or env.get(PROFILE_ENV):
        names = ", ".join(profiles) or "none"
        raise ConfigError(f"profile '{name}' is not in {path} (profiles: {names}); "
                          f"create it with `gpupool login --profile {name}`")
    creds = os.path.join(default_data_dir(env), "credentials.env")
    text = _read(creds)
    if text is not None:
        c = parse_env_file(text)
        out.append(_Place(c.get(ENDPOINT_ENV, ""), c.get(ACCESS_KEY_ENV, ""),
                          c.get(SECRET_KEY_ENV, ""), creds, c.get(CA_FILE_ENV, ""),
                          f"{CA_FILE_ENV} of {creds}"))
    return out


def resolve(endpoint: Optional[str], access_key: Optional[str], secret_key: Optional[str],
            profile: Optional[str] = None, env=None, ca_file: Optional[str] = None) -> Settings:
    """The settings Client() uses; ConfigError saying what is missing and how to set it."""
    env = os.environ if env is None else env
    if bool(access_key) != bool(secret_key):
        raise ConfigError("pass both access_key and secret_key, or neither")
    s = Settings(endpoint or "", access_key or "", secret_key or "",
                 "the arguments" if access_key else "")
    if endpoint and env.get(CA_FILE_ENV):
        s.ca_file, s.ca_source = env[CA_FILE_ENV], f"{CA_FILE_ENV} in the environment"
    for place in _candidates(env, profile):
        if not s.endpoint and place.endpoint:
            s.endpoint, s.ca_file, s.ca_source = place.endpoint, place.ca_file, place.ca_source
        if not s.access_key and place.access_key and place.secret_key:
            s.access_key, s.secret_key, s.source = (place.access_key, place.secret_key,
                                                    place.source)
    if ca_file:
        s.ca_file, s.ca_source = ca_file, "ca_file="
    if not s.ca_file:
        s.ca_source = ""
    missing = [what for what, have in (("endpoint", s.endpoint), ("access key", s.access_key),
                                       ("secret key", s.secret_key)) if not have]
    if missing:
        raise ConfigError(
            f"gpupool is not configured (no {', '.join(missing)}): pass endpoint=, access_key= "
            f"and secret_key= to Client(), set {ENDPOINT_ENV}, {ACCESS_KEY_ENV} and "
            f"{SECRET_KEY_ENV}, or run `gpupool login` (a new pool writes its admin "
            f"credentials to <data dir>/credentials.env)")
    return s
