"""From a request to the immutable input of planning: context and prompt text
(``render``), chunks measured in the context they will have (``measure``), exact padding
text (``filler``) and the checked, measured request (``measured_request``)."""
