"""Accounts of API users on the embedded site: users, passwords, TOTP, API keys, duty.

Secrets never come from the command line (it ends up in shell history and
process lists): a password is read from ``TOOLKIT_PASSWORD`` or stdin. A new API
key or TOTP secret is printed once, and only its hash (or the secret) is kept.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from toolkit.cli import cli
from toolkit.cli.context import global_options, note, open_site
from toolkit.cli.render import Columns, render

PASSWORD_ENV = "TOOLKIT_PASSWORD"


def _show_user(user: dict[str, Any]) -> None:
    render(user, lines=_user_line)


def _user_line(user: dict[str, Any]) -> str:
    duty = ", ".join(f"{d['eventId']}:{d['position']}" for d in user.get("duty", [])) or "-"
    return (
        f"{user['username']} (id {user['id']}): positions {', '.join(user['positions']) or '-'}; "
        f"approved {'yes' if user['approved'] else 'no'}; terms "
        f"{'accepted' if user['termsAccepted'] else 'not accepted'}; password "
        f"{'set' if user['hasPassword'] else 'not set'}; TOTP "
        f"{'yes' if user['hasTotp'] else 'no'}; account admin "
        f"{'yes' if user.get('admin') else 'no'}; duty {duty}"
    )


@cli.group("user")
@global_options
def user_group() -> None:
    """Set up users of the API (spec section 5) on the embedded site.

    An API user needs the position "API User", approval and accepted terms, a
    password or an API key, and duty in each event whose register data it uses.

    \b
    Examples:
      toolkit user add importer --position "API User" --approved --terms-accepted
      TOOLKIT_PASSWORD="$(cat secret.txt)" toolkit user password importer
      toolkit user totp importer
      toolkit user list
    """


@user_group.command("add")
@click.argument("username")
@click.option("--position", "positions", multiple=True, help="A position (repeatable).")
@click.option("--approved", is_flag=True, help="Approved by the operator and the customer.")
@click.option("--terms-accepted", is_flag=True, help="The API terms of use are accepted.")
@click.option("--admin", is_flag=True, help="May change accounts over the API (user imports).")
@click.option("--first-name")
@click.option("--last-name")
@click.option("--email")
@global_options
def user_add(
    username: str,
    positions: tuple[str, ...],
    approved: bool,
    terms_accepted: bool,
    admin: bool,
    first_name: str | None,
    last_name: str | None,
    email: str | None,
) -> None:
    """Add the user USERNAME.

    \b
    Examples:
      toolkit user add importer --position "API User" --approved --terms-accepted
    """
    with open_site(create=True) as site:
        _show_user(
            site.add_user(
                username,
                positions=positions,
                approved=approved,
                terms_accepted=terms_accepted,
                admin=admin,
                first_name=first_name,
                last_name=last_name,
                email=email,
            )
        )


@user_group.command("update")
@click.argument("username")
@click.option("--position", "positions", multiple=True, help="The positions (replace all).")
@click.option("--approved/--not-approved", default=None)
@click.option("--terms-accepted/--terms-not-accepted", default=None)
@click.option("--status", type=int, help="Positive is active; 0 disables the account.")
@click.option(
    "--admin/--not-admin",
    default=None,
    help="May change accounts over the API (user imports); set only here, by the operator.",
)
@global_options
def user_update(
    username: str,
    positions: tuple[str, ...],
    approved: bool | None,
    terms_accepted: bool | None,
    status: int | None,
    admin: bool | None,
) -> None:
    """Change positions, approval, terms, status or account administration of USERNAME.

    \b
    Examples:
      toolkit user update apiuser --position "API User" --position "Field Inspector"
      toolkit user update apiuser --not-approved
      toolkit user update apiuser --admin
    """
    with open_site() as site:
        _show_user(
            site.update_user(
                username,
                positions=positions or None,
                approved=approved,
                terms_accepted=terms_accepted,
                status=status,
                admin=admin,
            )
        )


@user_group.command("password")
@click.argument("username")
@global_options
def user_password(username: str) -> None:
    """Set the password of USERNAME from $TOOLKIT_PASSWORD or stdin (never an argument).

    On a terminal the password is asked for twice, hidden.

    \b
    Examples:
      TOOLKIT_PASSWORD="$(cat secret.txt)" toolkit user password apiuser
      toolkit user password apiuser < secret.txt
    """
    password = os.environ.get(PASSWORD_ENV)
    if password is None:
        if sys.stdin.isatty():
            password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
        else:
            password = sys.stdin.readline().rstrip("\r\n")
    with open_site() as site:
        user = site.set_password(username, password)
    note(f"password of {user['username']} set")
    render(user)  # the note above is the human answer; JSON readers get the account


@user_group.command("totp")
@click.argument("username")
@click.option("--remove", is_flag=True, help="Remove the user's TOTP device instead.")
@global_options
def user_totp(username: str, remove: bool) -> None:
    """Register a TOTP device for USERNAME and print its secret, once.

    From then on logging in needs mfaCode, the six digits of any TOTP app.

    \b
    Examples:
      toolkit user totp apiuser
      toolkit user totp apiuser --remove
    """
    with open_site() as site:
        if remove:
            _show_user(site.remove_totp(username))
            return
        device = site.register_totp(username)
    render(
        device,
        lines=lambda d: [
            f"TOTP secret of {d['username']} (shown once): {d['secret']}",
            f"otpauth URI: {d['uri']}",
        ],
    )


@user_group.command("list")
@global_options
def user_list() -> None:
    """List the users of the site (never their secrets).

    \b
    Examples:
      toolkit user list --json
    """
    with open_site() as site:
        users = site.list_users()
    columns = ["id", "username", "positions", "approved", "termsAccepted", "hasPassword"]
    table = Columns(
        [*columns, "hasTotp", "status"],
        title="users",
        rows=lambda us: [{**u, "positions": ", ".join(u["positions"])} for u in us],
    )
    render(users, table=table)


@cli.group("api-key")
@global_options
def api_key_group() -> None:
    """Issue and revoke API keys for machine logins (auth with apiKey).

    \b
    Examples:
      toolkit api-key issue apiuser --label "nightly import"
      toolkit api-key list
      toolkit api-key revoke 1
    """


@api_key_group.command("issue")
@click.argument("username")
@click.option("--label", help="What the key is for.")
@global_options
def api_key_issue(username: str, label: str | None) -> None:
    """Issue an API key for USERNAME and print it, once (only its hash is kept).

    \b
    Examples:
      toolkit api-key issue apiuser --label ci
    """
    with open_site() as site:
        key = site.issue_api_key(username, label)
    render(
        key,
        notes=lambda k: (
            f"API key {k['id']} (prefix {k['prefix']}) for {k['username']}; shown once:"
        ),
        lines=lambda k: k["key"],
    )


@api_key_group.command("revoke")
@click.argument("key")
@global_options
def api_key_revoke(key: str) -> None:
    """Revoke the API key KEY (its id or prefix); its tokens stop working at once.

    \b
    Examples:
      toolkit api-key revoke 1
    """
    with open_site() as site:
        revoked = site.revoke_api_key(key)
    render(revoked, notes=lambda k: f"API key {k['id']} (prefix {k['prefix']}) revoked")


@api_key_group.command("list")
@click.option("--user", "username", help="Only this user's keys.")
@global_options
def api_key_list(username: str | None) -> None:
    """List API keys (prefixes and labels, never the keys).

    \b
    Examples:
      toolkit api-key list --user apiuser
    """
    with open_site() as site:
        keys = site.list_api_keys(username)
    render(
        keys,
        table=Columns(
            ["id", "username", "prefix", "label", "revoked", "dateCreated"], title="keys"
        ),
    )


@cli.group("duty")
@global_options
def duty_group() -> None:
    """Put users on duty in events: reading or writing register data needs it.

    \b
    Examples:
      toolkit duty add apiuser --event-id 1 --position "Field Inspector"
      toolkit duty remove apiuser --event-id 1
    """


@duty_group.command("add")
@click.argument("username")
@click.option("--event-id", type=int, required=True)
@click.option("--position", required=True, help="The position the user holds in the event.")
@global_options
def duty_add(username: str, event_id: int, position: str) -> None:
    """Put USERNAME on duty in an event.

    \b
    Examples:
      toolkit duty add apiuser --event-id 1 --position "API User"
    """
    with open_site() as site:
        _show_user(site.put_on_duty(username, event_id, position))


@duty_group.command("remove")
@click.argument("username")
@click.option("--event-id", type=int, required=True)
@global_options
def duty_remove(username: str, event_id: int) -> None:
    """End every duty of USERNAME in an event.

    \b
    Examples:
      toolkit duty remove apiuser --event-id 1
    """
    with open_site() as site:
        _show_user(site.take_off_duty(username, event_id))
