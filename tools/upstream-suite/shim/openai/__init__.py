"""A minimal stand-in for the `openai` Python package, over `requests`.

llama-server's pytest suite imports `from openai import OpenAI` and calls
`chat.completions.create`, `completions.create` and `responses.create`,
streamed or not, then reads the answers' attributes. Debian has no `openai`
package, so scripts/upstream-suite.sh puts this directory first on
PYTHONPATH. It is not the SDK: answers are the server's JSON seen through
attributes (a field the server left out reads as None, as in the SDK's
models), streams are the server's `data:` events, and a status >= 400
raises APIStatusError with the body. `output_text` of a Responses answer is
computed as the SDK computes it: the text of its message items' output_text
parts.
"""

import json

import requests

__all__ = ["OpenAI", "OpenAIError", "APIError", "APIStatusError", "BadRequestError", "AuthenticationError",
           "NotFoundError", "APIConnectionError"]


class OpenAIError(Exception):
    pass


class APIError(OpenAIError):
    def __init__(self, message, body=None):
        super().__init__(message)
        self.message = message
        self.body = body


class APIConnectionError(APIError):
    pass


class APIStatusError(APIError):
    def __init__(self, message, status_code, body):
        super().__init__(message, body)
        self.status_code = status_code


class BadRequestError(APIStatusError):
    pass


class AuthenticationError(APIStatusError):
    pass


class NotFoundError(APIStatusError):
    pass


_status_errors = {400: BadRequestError, 401: AuthenticationError, 404: NotFoundError}


class Record:
    """JSON seen through attributes; a missing field is None."""

    def __init__(self, data):
        self._data = data

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if name == "output_text" and "output_text" not in self._data and "output" in self._data:
            return _output_text(self._data)
        return wrap(self._data.get(name))

    def __getitem__(self, key):
        return wrap(self._data[key])

    def __contains__(self, key):
        return key in self._data

    def to_dict(self):
        return self._data

    def model_dump(self, **_):
        return self._data

    def __repr__(self):
        return f"Record({json.dumps(self._data)})"


def wrap(value):
    if isinstance(value, dict):
        return Record(value)
    if isinstance(value, list):
        return [wrap(v) for v in value]
    return value


def _output_text(response):
    texts = []
    for item in response.get("output") or []:
        if item.get("type") != "message":
            continue
        for part in item.get("content") or []:
            if part.get("type") == "output_text":
                texts.append(part.get("text", ""))
    return "".join(texts)


def _events(response):
    """The JSON of each `data:` line of a server-sent event stream, up to [DONE]."""
    for raw in response.iter_lines():
        line = raw.decode("utf-8")
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        event = json.loads(payload)
        if isinstance(event, dict) and "error" in event and event.get("type") in (None, "error"):
            raise APIError(str(event["error"]), event)
        yield wrap(event)


class _Endpoint:
    def __init__(self, client, path):
        self._client = client
        self._path = path

    def create(self, *, extra_body=None, extra_headers=None, timeout=None, **body):
        body = {k: v for k, v in body.items() if v is not None}
        if extra_body:
            body.update(extra_body)
        return self._client._post(self._path, body, extra_headers, timeout)


class _Namespace:
    pass


class OpenAI:
    def __init__(self, api_key=None, base_url=None, timeout=600, max_retries=0, **_):
        if base_url is None:
            raise OpenAIError("this stand-in needs base_url")
        self.api_key = api_key
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.chat = _Namespace()
        self.chat.completions = _Endpoint(self, "/chat/completions")
        self.completions = _Endpoint(self, "/completions")
        self.responses = _Endpoint(self, "/responses")

    def _post(self, path, body, extra_headers, timeout):
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        if extra_headers:
            headers.update(extra_headers)
        stream = bool(body.get("stream"))
        try:
            r = requests.post(self.base_url + path, json=body, headers=headers, stream=stream,
                              timeout=timeout or self.timeout)
        except requests.RequestException as e:
            raise APIConnectionError(str(e)) from e
        if r.status_code >= 400:
            try:
                err = r.json()
            except ValueError:
                err = r.text
            cls = _status_errors.get(r.status_code, APIStatusError)
            raise cls(f"Error code: {r.status_code} - {err}", r.status_code, err)
        if stream:
            return _events(r)
        return wrap(r.json())
