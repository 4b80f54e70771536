"""The journal's field-path queries and secret hashes through the admin API and clients."""

from __future__ import annotations

import asyncio
import json

import pytest

from csi_mock.admin import AdminClient, AdminError
from tests.control.conftest import AdminDriver, StartAdmin
from tests.control.test_admin_api import raw_http, refused
from tests.driver.csi_helpers import create_volume, publish_request

POD_NAME = "csi.storage.k8s.io/pod.name"
SECRET = "p4ssw0rd-in-clear"


@pytest.fixture
async def whole(start_admin: StartAdmin) -> AdminDriver:
    return await start_admin(
        admin={"journal_requests": "whole"},
        node={"id": "node-1", "mount": "directory", "stage_unstage": False},
    )


async def published(
    driver: AdminDriver, tmp_path_factory: pytest.TempPathFactory, pod: str
) -> None:
    volume = await create_volume(driver.csi, f"pvc-{pod}")
    target = tmp_path_factory.mktemp("target") / "mount"
    request = publish_request(volume.volume_id, target, None, volume_context={POD_NAME: pod})
    request.secrets["password"] = SECRET
    await driver.csi.node.NodePublishVolume(request)


async def test_the_journal_is_queried_by_a_field_path(
    whole: AdminDriver, tmp_path_factory: pytest.TempPathFactory
) -> None:
    await published(whole, tmp_path_factory, "web-0")
    await published(whole, tmp_path_factory, "web-1")

    found = await whole.admin.journal(where={f'volume_context["{POD_NAME}"]': "web-1"})

    assert [r.method for r in found] == ["NodePublishVolume"]
    assert found[0].whole_request is not None
    assert found[0].whole_request["volume_context"] == {POD_NAME: "web-1"}
    both = await whole.admin.journal(
        method="NodePublishVolume", where={f'volume_context["{POD_NAME}"]': "web-*"}
    )
    assert len(both) == 2


async def test_a_test_asserts_which_secret_arrived_by_its_hash(
    whole: AdminDriver, tmp_path_factory: pytest.TempPathFactory
) -> None:
    await published(whole, tmp_path_factory, "web-0")
    digest = await whole.admin.secret_hash(SECRET)

    found = await whole.admin.journal(where={'secrets["password"]': digest})
    wrong = await whole.admin.journal(
        where={'secrets["password"]': await whole.admin.secret_hash("guess")}
    )

    assert [r.method for r in found] == ["NodePublishVolume"]
    assert wrong == []
    async with raw_http(whole) as http:
        answer = (await http.get("/v1/journal")).json()
    assert SECRET not in json.dumps(answer)
    assert answer["whole_capacity"] == 1000


async def test_the_hash_is_the_same_for_the_same_value_and_differs_otherwise(
    whole: AdminDriver,
) -> None:
    first, again = await whole.admin.secret_hash("a"), await whole.admin.secret_hash("a")

    assert first == again != await whole.admin.secret_hash("b")
    assert first.startswith("sha256:") and len(first) == len("sha256:") + 64


async def test_a_bad_field_path_is_a_400_naming_where(whole: AdminDriver) -> None:
    error = await refused(whole.admin.journal(where={"volume_context[pod]": "x"}))

    assert (error.status, error.field) == (400, "where.0")
    assert "'volume_context[pod]=x' at character 15" in error.message
    assert "expected an index or a quoted key" in error.message
    async with raw_http(whole) as http:
        response = await http.get("/v1/journal", params={"where": "volume_id"})
    assert response.status_code == 400
    assert "expected PATH=VALUE" in response.json()["error"]


async def test_a_secret_hash_needs_a_string_value(whole: AdminDriver) -> None:
    async with raw_http(whole) as http:
        response = await http.post("/v1/journal/secret-hash", json={"value": 5})
    assert (response.status_code, response.json()["field"]) == (400, "value")


async def test_in_keys_mode_a_path_reaches_the_key_fields(with_admin: AdminDriver) -> None:
    await create_volume(with_admin.csi, "pvc-a")
    await create_volume(with_admin.csi, "pvc-b")

    found = await with_admin.admin.journal(where={"name": "pvc-b"})

    assert [r.request["name"] for r in found] == ["pvc-b"]
    assert found[0].whole_request is None


async def test_the_sync_client_queries_and_hashes_too(
    whole: AdminDriver, tmp_path_factory: pytest.TempPathFactory
) -> None:
    await published(whole, tmp_path_factory, "web-0")

    def use_sync_client() -> tuple[int, str]:
        with AdminClient(whole.server.socket_path) as admin:
            digest = admin.secret_hash(SECRET)
            return len(admin.journal(where={'secrets["password"]': digest})), digest

    count, digest = await asyncio.to_thread(use_sync_client)
    assert count == 1 and digest == whole.driver.journal.secret_hash(SECRET)
    with pytest.raises(AdminError):
        await whole.admin.journal(where={"": "x"})
