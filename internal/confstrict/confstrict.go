// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package confstrict reports the keys of a component config that no field
// takes, where confighttp's own Unmarshal lets them through.
package confstrict // import "github.com/inferprof/inferprof/internal/confstrict"

import (
	"errors"
	"reflect"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/confmap"
)

// plainClient and plainServer are confighttp's configs without their
// Unmarshal methods: confmap then decodes them as the structs they are,
// with the unknown-key check on. The fields, tags and types are the same.
type (
	plainClient confighttp.ClientConfig
	plainServer confighttp.ServerConfig
)

var plain = map[reflect.Type]reflect.Type{
	reflect.TypeFor[confighttp.ClientConfig](): reflect.TypeFor[plainClient](),
	reflect.TypeFor[confighttp.ServerConfig](): reflect.TypeFor[plainServer](),
}

// Check returns confmap's "has invalid keys" error for the keys of conf
// that cfg (a pointer to a config struct) has no field for.
//
// confighttp.ClientConfig and ServerConfig decode with WithIgnoreUnused
// because they are often squashed into a parent; confmap then checks no key
// of the parent either, so a typo or a renamed key is silently dropped
// (open-telemetry/opentelemetry-collector#15907). Check decodes conf once
// more into a twin of cfg's type in which those two are plain structs. Call
// it after the real decode succeeded: it only adds the key check.
func Check(conf *confmap.Conf, cfg any) error {
	t := reflect.TypeOf(cfg)
	if t == nil || t.Kind() != reflect.Pointer {
		return nil
	}
	tt := twinOf(t.Elem())
	if tt == t.Elem() {
		// No confighttp config in it: the real decode checked every key
		// (and decoding the same type again would call its Unmarshal).
		return nil
	}
	err := conf.Unmarshal(reflect.New(tt).Interface())
	if err == nil {
		return nil
	}
	// confmap names the root by its type; the twin's is an unnamed struct
	// literal, so name it as the real decode would, e.g.
	// 'graphsignalexporter.Config' has invalid keys: local_endpoint.
	return errors.New(strings.ReplaceAll(err.Error(), "'"+tt.String()+"'", "'"+t.Elem().String()+"'"))
}

var twins sync.Map // reflect.Type -> reflect.Type

// twinOf returns t with every confighttp client or server config in it,
// at any depth of plain struct fields, replaced by its plain twin; t itself
// when it holds none. Unexported fields are left out: confmap never sets them.
func twinOf(t reflect.Type) reflect.Type {
	if p, ok := plain[t]; ok {
		return p
	}
	if t.Kind() != reflect.Struct {
		return t
	}
	if v, ok := twins.Load(t); ok {
		return v.(reflect.Type)
	}
	fields := make([]reflect.StructField, 0, t.NumField())
	changed := false
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			changed = true
			continue
		}
		if ft := twinOf(f.Type); ft != f.Type {
			f.Type = ft
			changed = true
		}
		// StructOf does not promote an embedded field's methods; a squash tag
		// keeps its keys at the parent's level, as the embedding did.
		if f.Anonymous {
			f.Anonymous = false
			if _, ok := f.Tag.Lookup("mapstructure"); !ok {
				f.Tag = `mapstructure:",squash"`
			}
			changed = true
		}
		fields = append(fields, f)
	}
	out := t
	if changed && hasPlain(t) {
		out = reflect.StructOf(fields)
	}
	twins.Store(t, out)
	return out
}

// hasPlain tells whether t holds a confighttp config in its plain struct
// fields; only those types are rebuilt, the rest keep their own Unmarshal.
func hasPlain(t reflect.Type) bool {
	if _, ok := plain[t]; ok {
		return true
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && hasPlain(f.Type) {
			return true
		}
	}
	return false
}
