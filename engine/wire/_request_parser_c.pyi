# The compiled RequestParser has the reference's interface exactly: mypy sees one class.
from streamkeep.engine.wire._request_parser_py import RequestParser as RequestParser
