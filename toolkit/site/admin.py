"""Users of the API on an embedded site: accounts, credentials, duty, and logging in.

:class:`SiteAdmin` is mixed into ``LocalSite``. The admin commands set accounts
up (spec section 5: the API User position, approval, accepted terms, duty in
events); :meth:`SiteAdmin.authenticate` checks an ``auth`` body and
:meth:`SiteAdmin.api_user` re-checks the account on every call. Secrets are
hashed before they reach the store and never returned, apart from a new API
key or TOTP secret, shown once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from toolkit.errors import (
    AuthenticationError,
    NotFoundError,
    OptionError,
    PermissionDeniedError,
)
from toolkit.model.rows import StoredRow
from toolkit.query.filters import format_time, parse_int
from toolkit.site.credentials import (
    API_USER_POSITION,
    api_key_prefix,
    check_auth_body,
    check_password_strength,
    hash_secret,
    new_api_key,
    new_totp_secret,
    totp_step,
    totp_uri,
    verify_secret,
)
from toolkit.store import Actor, Database, SiteStore

BAD_CREDENTIALS = "invalid credentials"
# Who calls a site that ``toolkit serve`` runs before a request names its user: no one, so
# no account may be changed (fail closed).
NO_CALLER: dict[str, Any] = {}


class SiteAdmin:
    """Accounts and authentication of ``LocalSite``."""

    db: Database
    store: SiteStore
    user_id: str | None
    lock: threading.RLock
    # The API user a server call runs as (``toolkit serve`` sets it per request); None is
    # the operator at the embedded site's CLI, who may change every account.
    caller: dict[str, Any] | None = None

    def require_account_admin(self, what: str) -> None:
        """Refuse (403) a change of accounts by an API user who is not an account admin.

        Accounts are changed by the operator (the CLI on the embedded site) or, over the
        API, only by a user the operator made an admin with ``toolkit user update --admin``.
        """
        caller = self.caller
        if caller is None or caller.get("admin"):
            return
        who = caller.get("username")
        raise PermissionDeniedError(
            f"{what} changes accounts, which needs an account administrator; "
            + (f"user {who!r} is not one; " if who else "")
            + "the operator grants it with `toolkit user update NAME --admin`"
        )

    # --- accounts -----------------------------------------------------------------------------

    def add_user(
        self,
        username: str,
        *,
        positions: Iterable[str] = (),
        approved: bool = False,
        terms_accepted: bool = False,
        admin: bool = False,
        first_name: str | None = None,
        last_name: str | None = None,
        email: str | None = None,
    ) -> dict[str, Any]:
        self.require_account_admin("adding a user")
        username = username.strip()
        if not username:
            raise OptionError("a user needs a username")
        if self.store.users.by_username(username) is not None:
            raise OptionError(f"user {username!r} already exists in site {self.store.name!r}")
        columns = {
            "username": username,
            "first_name": first_name,
            "last_name": last_name,
            "email": email,
            "positions": json.dumps(list(positions), ensure_ascii=False),
            "approved": int(approved),
            "terms_accepted": int(terms_accepted),
            "admin": int(admin),
        }
        with self.lock:
            user_id = self.store.auth.add_user(columns, Actor(self.user_id))
        return self.get_user(user_id)

    def get_user(self, user: int | str) -> dict[str, Any]:
        """A user by id or username, without secrets, with the events the user is on duty in."""
        row = self._user_row(user)
        duty = [
            {"eventId": d["event_id"], "position": d["position"]}
            for d in self.store.auth.duties(row["id"])
        ]
        return {**user_object(row), "duty": duty}

    def list_users(self) -> list[dict[str, Any]]:
        return [user_object(r) for r in self.store.users.all()]

    def update_user(
        self,
        user: int | str,
        *,
        positions: Iterable[str] | None = None,
        approved: bool | None = None,
        terms_accepted: bool | None = None,
        status: int | None = None,
        admin: bool | None = None,
    ) -> dict[str, Any]:
        self.require_account_admin("updating a user")
        row = self._user_row(user)
        columns: dict[str, object] = {}
        if positions is not None:
            columns["positions"] = json.dumps(list(positions), ensure_ascii=False)
        if approved is not None:
            columns["approved"] = int(approved)
        if terms_accepted is not None:
            columns["terms_accepted"] = int(terms_accepted)
        if status is not None:
            columns["status"] = status
        if admin is not None:
            columns["admin"] = int(admin)
        with self.lock:
            self.store.auth.update_user(row["id"], columns, Actor(self.user_id))
        return self.get_user(row["id"])

    def set_password(self, user: int | str, password: str) -> dict[str, Any]:
        self.require_account_admin("setting a password")
        check_password_strength(password)
        row = self._user_row(user)
        with self.lock:
            self.store.auth.update_user(
                row["id"], {"password_hash": hash_secret(password)}, Actor(self.user_id)
            )
        return self.get_user(row["id"])

    def register_totp(self, user: int | str) -> dict[str, str]:
        """Give the user a TOTP device; returns its secret and otpauth URI (shown once)."""
        self.require_account_admin("registering a TOTP device")
        row = self._user_row(user)
        secret = new_totp_secret()
        with self.lock:
            self.store.auth.update_user(row["id"], {"totp_secret": secret}, Actor(self.user_id))
        return {
            "username": row["username"],
            "secret": secret,
            "uri": totp_uri(secret, row["username"], self.store.name),
        }

    def remove_totp(self, user: int | str) -> dict[str, Any]:
        self.require_account_admin("removing a TOTP device")
        row = self._user_row(user)
        with self.lock:
            self.store.auth.update_user(row["id"], {"totp_secret": None}, Actor(self.user_id))
        return self.get_user(row["id"])

    def issue_api_key(self, user: int | str, label: str | None = None) -> dict[str, Any]:
        """A new API key for the user; ``key`` is in this answer only, never stored."""
        self.require_account_admin("issuing an API key")
        row = self._user_row(user)
        issued = new_api_key()
        with self.lock:
            key_id = self.store.auth.add_api_key(row["id"], issued.prefix, issued.key_hash, label)
        return {**self._key_object(key_id), "key": issued.key}

    def revoke_api_key(self, key: int | str) -> dict[str, Any]:
        """Revoke a key given by id or prefix."""
        self.require_account_admin("revoking an API key")
        row = self._key_row(key)
        with self.lock:
            self.store.auth.revoke_api_key(row["id"], Actor(self.user_id))
        return self._key_object(row["id"])

    def list_api_keys(self, user: int | str | None = None) -> list[dict[str, Any]]:
        user_id = None if user is None else self._user_row(user)["id"]
        return [_key_json(r) for r in self.store.auth.api_keys(user_id)]

    def put_on_duty(self, user: int | str, event_id: int, position: str) -> dict[str, Any]:
        self.require_account_admin("putting a user on duty")
        row = self._user_row(user)
        if self.store.events.get(event_id) is None:
            raise NotFoundError(f"event {event_id} does not exist")
        if not position.strip():
            raise OptionError("a duty needs a position")
        with self.lock:
            self.store.auth.put_on_duty(row["id"], event_id, position.strip(), Actor(self.user_id))
        return self.get_user(row["id"])

    def take_off_duty(self, user: int | str, event_id: int) -> dict[str, Any]:
        self.require_account_admin("taking a user off duty")
        row = self._user_row(user)
        with self.lock:
            self.store.auth.take_off_duty(row["id"], event_id, Actor(self.user_id))
        return self.get_user(row["id"])

    # --- logging in ---------------------------------------------------------------------------

    def authenticate(self, body: Mapping[str, Any], *, now_s: float) -> dict[str, Any]:
        """Check an ``auth`` body (spec 5); the user allowed to use the API, with ``keyId``.

        Bad input is :class:`OptionError` (400); wrong credentials are
        :class:`AuthenticationError` (401) without saying which part was wrong; an
        account not allowed to use the API is :class:`PermissionDeniedError` (403).
        """
        check_auth_body(body)
        key_id: int | None = None
        if "apiKey" in body:
            prefix = api_key_prefix(body["apiKey"])
            key = self.store.auth.api_key(prefix) if prefix else None
            proved = verify_secret(key["key_hash"] if key else None, body["apiKey"])
            if key is None or not proved or key["revoked"]:
                raise AuthenticationError(BAD_CREDENTIALS)
            row = self.store.users.get(key["user_id"])
            key_id = int(key["id"])
        else:
            row = self.store.users.by_username(body["username"])
            proved = verify_secret(row["password_hash"] if row else None, body["password"])
            if row is None or not proved:
                raise AuthenticationError(BAD_CREDENTIALS)
            if row["totp_secret"]:
                step = totp_step(row["totp_secret"], body.get("mfaCode"), now_s)
                # A code logs in once: a step already used (or older) is refused, so a code
                # seen by someone else cannot be replayed within its 30 seconds.
                if step is None or not self.store.auth.use_totp_step(row["id"], step):
                    raise AuthenticationError(BAD_CREDENTIALS)
        if row is None:
            raise AuthenticationError(BAD_CREDENTIALS)
        check_api_access(row)
        return {**user_object(row), "keyId": key_id}

    def api_user(self, user_id: int, key_id: int | None = None) -> dict[str, Any]:
        """The user a token names, checked again (approval or a key may have been withdrawn)."""
        row = self.store.users.get(user_id)
        if row is None:
            raise AuthenticationError("the token's user no longer exists")
        if key_id is not None:
            key = self.store.auth.api_key_by_id(key_id)
            if key is None or key["revoked"] or key["user_id"] != user_id:
                raise AuthenticationError("the API key of this token has been revoked")
        check_api_access(row)
        return user_object(row)

    def duty_events(self, user_id: int) -> set[int]:
        return self.store.auth.duty_events(user_id)

    # --- helpers ------------------------------------------------------------------------------

    def _user_row(self, user: int | str) -> Any:
        if isinstance(user, int) or (isinstance(user, str) and user.isdigit()):
            row = self.store.users.get(int(user))
            if row is None and isinstance(user, str):
                row = self.store.users.by_username(user)
        else:
            row = self.store.users.by_username(user)
        if row is None:
            raise NotFoundError(f"user {user!r} does not exist in site {self.store.name!r}")
        return row

    def _key_row(self, key: int | str) -> Any:
        row = None
        if isinstance(key, int) or str(key).isdigit():
            row = self.store.auth.api_key_by_id(parse_int("key id", str(key)))
        if row is None:
            row = self.store.auth.api_key(api_key_prefix(str(key)) or str(key))
        if row is None:
            raise NotFoundError(f"API key {key!r} does not exist in site {self.store.name!r}")
        return row

    def _key_object(self, key_id: int) -> dict[str, Any]:
        return next(_key_json(r) for r in self.store.auth.api_keys() if r["id"] == key_id)


def check_api_access(row: Any) -> None:
    """Spec 5, rules 4 and 6: active, the API User position, approved, terms accepted."""
    missing = []
    if row["status"] <= 0:
        missing.append("an active account")
    if API_USER_POSITION not in json.loads(row["positions"] or "[]"):
        missing.append(f"the position {API_USER_POSITION!r}")
    if not row["approved"]:
        missing.append("approval by the operator")
    if not row["terms_accepted"]:
        missing.append("accepted API terms of use")
    if missing:
        raise PermissionDeniedError(
            "this account may not use the API: it needs " + ", ".join(missing)
        )


def user_object(row: StoredRow) -> dict[str, Any]:
    """A user as the admin commands show it: never a hash or a secret."""
    return {
        "id": row["id"],
        "username": row["username"],
        "firstName": row["first_name"],
        "lastName": row["last_name"],
        "email": row["email"],
        "positions": json.loads(row["positions"] or "[]"),
        "status": row["status"],
        "active": row["status"] > 0,
        "approved": bool(row["approved"]),
        "termsAccepted": bool(row["terms_accepted"]),
        "admin": bool(row["admin"]),
        "hasPassword": row["password_hash"] is not None,
        "hasTotp": row["totp_secret"] is not None,
        "dateCreated": format_time(row["date_created"]),
        "dateModified": format_time(row["date_modified"]),
    }


def _key_json(row: StoredRow) -> dict[str, Any]:
    return {
        "id": row["id"],
        "userId": row["user_id"],
        "username": row["username"],
        "prefix": row["prefix"],
        "label": row["label"],
        "revoked": bool(row["revoked"]),
        "dateCreated": format_time(row["date_created"]),
        "dateRevoked": format_time(row["date_revoked"]),
    }
