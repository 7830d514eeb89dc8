{{/*
Python put before a service's program (python3 -c PROGRAM): a native thread that gives the
C heap's free pages back to the kernel every .seconds seconds (glibc's malloc_trim(0)). A
Python service that served a burst (an image upload, a volume's setup) keeps the freed
memory in glibc's heap otherwise: idle glance-api held 26 MiB and cinder-server 7 MiB
that malloc_trim returned. The thread starts before the program imports anything, so
eventlet's patching later does not reach the real sleep it holds, and it shares no lock
with the service; a trim of an idle heap takes about a millisecond.
Call with (dict "seconds" N); 0 puts nothing. Its last line ends with "# end of
osd-lib.mallocTrim" (the charts' tests split on it).
*/}}
{{- define "osd-lib.mallocTrim" -}}
{{- $v := toString .seconds -}}
{{- if not (regexMatch "^[0-9]+$" $v) -}}
{{- fail (printf "mallocTrimSeconds: %q is not whole seconds (0: never)" $v) -}}
{{- end -}}
{{- $n := int $v -}}
{{- if gt $n 0 -}}
def _osd_malloc_trim(seconds):
    import _thread, ctypes, time
    sleep, trim = time.sleep, ctypes.CDLL("libc.so.6").malloc_trim
    def run():
        while True:
            sleep(seconds)
            trim(0)
    _thread.start_new_thread(run, ())
_osd_malloc_trim({{ $n }})
del _osd_malloc_trim  # end of osd-lib.mallocTrim
{{ end -}}
{{- end -}}

{{/*
A file of the osd-lib chart (its files/ directory: the Python programs the steps run):
(dict "ctx" $ "path" "files/wait_db.py"). The calling chart's .Files holds its own files
only; osd-lib's are reached through .Subcharts. Fails when the file is missing or empty.
*/}}
{{- define "osd-lib.file" -}}
{{- $lib := index (.ctx.Subcharts | default dict) "osd-lib" -}}
{{- $text := "" -}}
{{- if $lib -}}
{{- $text = $lib.Files.Get .path -}}
{{- end -}}
{{- if not $text -}}
{{- fail (printf "osd-lib: no file %s in the osd-lib chart" .path) -}}
{{- end -}}
{{- $text -}}
{{- end -}}
