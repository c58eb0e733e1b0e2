"""Settings from the environment and `.env` (pydantic-settings), in groups; every key is documented in `.env.example`.

`Settings` is made of groups (agents/core/setting_groups.py): the code reads `settings.voice.whisper_model`, while the
keys stay the flat ones of `.env` and the environment (WHISPER_MODEL). Two small pieces keep them flat: a source that
asks pydantic-settings' own environment and `.env` sources for every group's keys, and a validator that puts each
flat key given in code (`Settings(whisper_model=...)`, as tests and scripts build them) under its group."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Self

from pydantic import AliasChoices, BaseModel, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from agents.core.setting_groups import (
    AnthropicSettings,
    AttachmentSettings,
    BriefingSettings,
    CommitSettings,
    EngineSettings,
    GitHubSettings,
    LogSettings,
    NetworkSettings,
    OrchestratorSettings,
    PathSettings,
    ReviewSettings,
    SandboxSettings,
    ScheduleSettings,
    StreamingSettings,
    TaskSettings,
    TelegramSettings,
    ToolSettings,
    UserSettings,
    VoiceSettings,
    WorkerSettings,
)


class Settings(BaseSettings):
    """Everything the bot can be configured with, in groups. A group's field names are the env keys, lower-cased."""

    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore")

    # the order is the order in which missing keys are named: the required ones are in the first four groups
    telegram: TelegramSettings
    anthropic: AnthropicSettings
    users: UserSettings
    paths: PathSettings
    orchestrator: OrchestratorSettings
    workers: WorkerSettings
    tasks: TaskSettings
    commits: CommitSettings
    briefing: BriefingSettings
    voice: VoiceSettings
    attachments: AttachmentSettings
    sandboxing: SandboxSettings
    network: NetworkSettings
    tools: ToolSettings
    engine: EngineSettings
    schedules: ScheduleSettings
    github: GitHubSettings
    review: ReviewSettings
    streaming: StreamingSettings
    logs: LogSettings

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """pydantic-settings' own sources and order, the environment and `.env` asked for the groups' flat keys; no
        secrets directory (none is configured). The `.env` source is left out when told there is no file
        (`Settings(_env_file=None, ...)`, as tests and scripts build them): it has nothing to read then, yet walks
        every key again, about 40% of the time a Settings takes to build."""
        environment = FlatKeys(settings_cls, env_settings)
        if isinstance(dotenv_settings, DotEnvSettingsSource) and dotenv_settings.env_file is None:
            return init_settings, environment
        return init_settings, environment, FlatKeys(settings_cls, dotenv_settings)

    @model_validator(mode="before")
    @classmethod
    def _group_flat_keys(cls, data: Any) -> Any:
        """Each flat key given in code under its group (it wins over the environment's, as a keyword argument always
        did), and every group present, so that a missing required key is named (TELEGRAM_BOT_TOKEN), not its group.
        An unknown key is ignored, as before the groups."""
        if not isinstance(data, Mapping):
            return data
        grouped: dict[str, Any] = {name: {} for name in cls.model_fields}
        flat: list[tuple[Leaf, str, Any]] = []
        for key, value in data.items():
            if key in cls.model_fields:
                grouped[key] = dict(value) if isinstance(value, Mapping) else value
            elif (leaf := LEAF_BY_KEY.get(str(key).lower())) is not None:
                flat.append((leaf, str(key).lower(), value))
        for leaf, key, value in flat:
            group = grouped[leaf.group]
            if isinstance(group, BaseModel):  # a whole group given with a key of it: the key is set on its values
                group = grouped[leaf.group] = group.model_dump()
            if isinstance(group, dict):
                for other in leaf.keys:  # LOG_FORMAT given in code wins over AGENTLAB_LOG_FORMAT from the environment
                    group.pop(other, None)
                group[key if key in leaf.keys else leaf.keys[0]] = value
        return grouped

    @model_validator(mode="after")
    def _one_server_per_address(self) -> Self:
        """GitHub's webhook and the review page are two servers: on one address the second could not listen (the
        review server's default address is the one a guide would pick for the webhook)."""
        review = self.review.review_listen if self.review.review_url else None
        if review is not None and self.github.github_webhook_listen == review:
            raise ValueError(
                f"GITHUB_WEBHOOK_LISTEN and REVIEW_LISTEN are both {review}: the review page and GitHub's webhook are "
                "two servers, give each its own port (e.g. GITHUB_WEBHOOK_LISTEN=127.0.0.1:8089)"
            )
        return self

    @model_validator(mode="after")
    def _read_paths_keep_out_of_the_bots_places(self) -> Self:
        """Each SANDBOX_READ_PATHS entry, resolved (links, `..`), is what every task's sandbox shows read-only: never
        the whole machine, never a folder that holds one of the bot's own places (its `.env` and working folder, its
        checkout, the data folder, the task worktrees, the workspaces), never a folder inside the data folder, the
        task worktrees or the workspaces (a workspace's or the bot's private files). The resolved paths are kept, so
        the sandbox binds what was checked."""
        resolved = tuple(Path(os.path.realpath(path)) for path in self.sandboxing.sandbox_read_paths)
        for given, real in zip(self.sandboxing.sandbox_read_paths, resolved, strict=True):
            entry = f"SANDBOX_READ_PATHS entry {given}" + (f" (which is {real})" if real != given else "")
            if real == Path(real.anchor):
                raise ValueError(
                    f"{entry} is the whole machine: every task could read the bot's .env, its database and every "
                    "workspace; name the folder the task needs (e.g. /opt/node)"
                )
            for name, place in self._bots_places():
                if place.is_relative_to(real):
                    raise ValueError(
                        f"{entry} holds {name} ({place}), which every task could then read; name a folder beside it"
                    )
            for name, place in self._private_places():
                if real.is_relative_to(place):
                    raise ValueError(
                        f"{entry} lies inside {name} ({place}), whose files are the bot's or a workspace's own"
                    )
        self.sandboxing.sandbox_read_paths = resolved
        return self

    def _private_places(self) -> list[tuple[str, Path]]:
        """The places no read path may lie inside, resolved: the data folder, the task worktrees, the workspaces."""
        paths = self.paths
        return [
            ("the bot's data folder (DATABASE_PATH's folder)", paths.data_dir),
            ("the task worktrees folder", paths.worktrees_dir),
            ("WORKSPACE_PATH", Path(os.path.realpath(Path(paths.workspace_path).expanduser()))),
        ]

    def _bots_places(self) -> list[tuple[str, Path]]:
        """Every place of the bot's own no read path may hold, resolved: the private ones, its checkout, its `.env`
        and the working folder it was started in (where `.env` is read)."""
        places = self._private_places()
        if self.paths.bot_repository is not None:
            places.append(("BOT_REPOSITORY", Path(os.path.realpath(Path(self.paths.bot_repository).expanduser()))))
        working = Path(os.path.realpath(Path.cwd()))
        return [*places, ("the bot's .env", working / ".env"), ("the bot's working folder", working)]

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with `update` applied, its keys flat (`{"worker_model": ...}`) or whole groups: each flat key is
        set on a copy of its group. Unchecked, as pydantic's own copy; an unknown key is an error (pydantic's copy
        would add it as an attribute nothing reads)."""
        if not update:
            return super().model_copy(deep=deep)
        groups: dict[str, Any] = {}
        per_group: dict[str, dict[str, Any]] = {}
        for key, value in update.items():
            if key in type(self).model_fields:
                groups[key] = value
            elif (leaf := LEAF_BY_KEY.get(key.lower())) is not None:
                per_group.setdefault(leaf.group, {})[leaf.name] = value
            else:
                raise KeyError(f"Settings has no key {key!r}")
        for name, values in per_group.items():
            group: BaseModel = groups.get(name, getattr(self, name))
            groups[name] = group.model_copy(update=values, deep=deep)
        return super().model_copy(update=groups, deep=deep)

    def secret_values(self) -> list[str]:
        """Every secret the settings hold (the Telegram token and its secret half, the API key, the webhook secret,
        GitHub's token and webhook secret): the one list the log's redaction and the output filter start from."""
        token = self.telegram.telegram_bot_token.get_secret_value()
        optional = (
            self.telegram.webhook_secret_token,
            self.github.github_token,
            self.github.github_webhook_secret,
        )
        found = [token, token.partition(":")[2], self.anthropic.anthropic_api_key.get_secret_value()]
        found += [s.get_secret_value() for s in optional if s is not None]
        return [s for s in found if s]

    if not TYPE_CHECKING:  # the type checker reports a flat read itself; at run time it is named with its group

        def __getattr__(self, name: str) -> Any:
            leaf = LEAF_BY_KEY.get(name)
            if leaf is not None and leaf.name == name:
                raise AttributeError(f"Settings has no {name!r}: it is settings.{leaf.group}.{name}")
            return super().__getattr__(name)


class Leaf(NamedTuple):
    """One setting: the group that holds it, its field (named as its env key), and the keys its value may be given
    under, the first the one it is handed on under (AGENTLAB_LOG_FORMAT before LOG_FORMAT; most have one)."""

    group: str
    name: str
    keys: tuple[str, ...]
    field: FieldInfo


def _leaves() -> Iterator[Leaf]:
    for group, holder in Settings.model_fields.items():
        model = holder.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel), f"Settings.{group} is not a group"
        for name, field in model.model_fields.items():
            alias = field.validation_alias
            aliases = [a for a in alias.choices if isinstance(a, str)] if isinstance(alias, AliasChoices) else []
            yield Leaf(group, name, tuple(aliases) or (name,), field)


LEAVES: tuple[Leaf, ...] = tuple(_leaves())
# every name a setting may be given under in code or the environment (lower-case), to its leaf
LEAF_BY_KEY: dict[str, Leaf] = {key: leaf for leaf in LEAVES for key in (leaf.name, *leaf.keys)}


def env_keys() -> frozenset[str]:
    """Every environment key the settings read, upper-case: the fields' names and their aliases."""
    return frozenset(key.upper() for key in LEAF_BY_KEY)


class FlatKeys(PydanticBaseSettingsSource):
    """One of pydantic-settings' own sources (the environment, `.env`) asked for every group's keys as they are
    spelled there, flat (WHISPER_MODEL, not VOICE__WHISPER_MODEL); what it finds is handed on under the groups. The
    documented shape of a custom source: `get_field_value` and `prepare_field_value` for each field."""

    def __init__(self, settings_cls: type[BaseSettings], source: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self.source = source

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """The value of one setting in the wrapped source (None when it does not hold it)."""
        return self.source.get_field_value(field, field_name)

    def __call__(self) -> dict[str, Any]:
        found: dict[str, dict[str, Any]] = {}
        for leaf in LEAVES:
            value, _, is_complex = self.source.get_field_value(leaf.field, leaf.name)
            value = self.source.prepare_field_value(leaf.name, leaf.field, value, is_complex)
            if value is not None:
                found.setdefault(leaf.group, {})[leaf.keys[0]] = value
        return found


class SettingsError(Exception):
    """Settings could not be loaded; the message is one line that names the key."""


def describe_validation_error(err: ValidationError) -> str:
    """One line naming every bad key, e.g. `TELEGRAM_BOT_TOKEN: missing; ALLOWED_USER_IDS: must be ...`."""
    parts = []
    for e in err.errors():
        names = [str(p) for p in e["loc"] if isinstance(p, str)]
        key = (names[1] if len(names) > 1 and names[0] in Settings.model_fields else "_".join(names)).upper() or "?"
        msg = "missing (required)" if e["type"] == "missing" else e["msg"].removeprefix("Value error, ")
        parts.append(f"{key}: {msg}" if key != "?" else msg)  # a check across keys names them itself
    return "; ".join(parts)


def load_settings(**overrides: Any) -> Settings:
    """Load settings, raising SettingsError with one clear line on a missing or malformed key."""
    try:
        return Settings(**overrides)
    except ValidationError as err:
        raise SettingsError(f"configuration error: {describe_validation_error(err)}") from None
