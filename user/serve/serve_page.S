/* Embeds serve.html, the page of `ember serve`, as ember_serve_html[_end]. */
	.section .rodata
	.global ember_serve_html
	.global ember_serve_html_end
ember_serve_html:
	.incbin "user/serve/serve.html"
ember_serve_html_end:
	.section .note.GNU-stack,"",@progbits
