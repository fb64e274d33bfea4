"""The mock engine runs alone in a pod and cannot import modelplane: its default port is
typed out there, and must be the port the renderers probe and route to."""

from modelplane.runtime import mock_engine
from modelplane.vocabulary import ENGINE_PORT


def test_mock_engine_listens_on_the_engine_port_by_default():
    assert mock_engine.parse_args([]).port == ENGINE_PORT
